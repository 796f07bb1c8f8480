public import PushFleetLedger

/// One second of a run as the live page sees it (`--live`, docs/live.md): counts so far, the
/// seconds completed since the previous frame, and, as often as its cost allows, the ledger's
/// and the rules' judgement of a sliding window and of the run so far, made by the very code the
/// final report's windowed verdict uses.
public struct LiveFrame: Sendable, Codable, Equatable {
    /// Seconds since the run's start.
    public var second: Double
    /// `arriving`, `traffic`, `draining`, `done`.
    public var phase: String
    public var devices: Devices
    public var totals: Totals
    /// The seconds completed since the previous frame, by when things happened.
    public var seconds: [Second]
    /// Errors so far by class.
    public var errors: [String: Int]
    public var generator: Generator
    /// Markers (faults, stops) since the previous frame.
    public var markers: [Marker]
    /// Nil in a frame no judgement was made for.
    public var judged: Judged?
    /// A sharded run's shards, followed from their folders (nil for one process).
    public var shards: [ShardState]? = nil

    public struct ShardState: Sendable, Codable, Equatable {
        public var index: Int
        /// `not started`, `starting`, `waiting at the start barrier`, `arriving`, `waiting at
        /// the traffic barrier`, `in traffic`, `done`, `stopped`, `failed`.
        public var state: String
        public var reason: String?
        /// Events its tape holds so far.
        public var events: Int

        public init(index: Int, state: String, reason: String? = nil, events: Int = 0) {
            self.index = index
            self.state = state
            self.reason = reason
            self.events = events
        }
    }

    public struct Devices: Sendable, Codable, Equatable {
        public var planned: Int
        public var ready: Int
        public var failed: Int
    }

    public struct Totals: Sendable, Codable, Equatable {
        public var sends: Int
        public var sendFailures: Int
        public var sendsDropped: Int
        public var sendsLateStart: Int
        public var received: Int
        public var errors: Int
    }

    public struct Second: Sendable, Codable, Equatable {
        public var second: Int
        /// Sends made, and those due but dropped: offered is their sum.
        public var sends: Int
        public var dropped: Int
        public var received: Int
        public var errors: Int
        public var devicesReady: Int
    }

    public struct Generator: Sendable, Codable, Equatable {
        /// Sends whose sender woke more than 10 ms late, and the longest lag (ms).
        public var lateWakes: Int
        public var longestWakeLagMs: Double
        /// How long the newest applied event had waited for the recorder (ms).
        public var eventLagMs: Double
        /// The process's CPU since the previous frame, in cores (nil for a followed sharded run).
        public var cpuCores: Double? = nil
    }

    public struct Marker: Sendable, Codable, Equatable {
        public var second: Double
        public var label: String
    }

    public struct Judged: Sendable, Codable, Equatable {
        /// The sliding window judged: sends intended in [start, end) seconds, a deadline behind now.
        public var windowStart: Double
        public var windowEnd: Double
        /// The window's latencies (p50, p99 in ms, count) by operation: delivery, end_to_end,
        /// http.send, the hops.
        public var latency: [String: Latency]
        public var windowDelivery: DeliveryLedger.Counts
        /// Every pair of sends intended before the window's end, judged so far.
        public var soFarDelivery: DeliveryLedger.Counts
        /// Pairs expected of sends not yet a deadline old.
        public var inFlight: Int
        /// Each platform's funnel so far (sends, pairs expected, handed to the push service,
        /// accepted, written to the device, received, in hand), as the report's.
        public var funnel: [String: DeliveryLedger.Funnel]
        public var offeredRate: Double
        public var throughput: Double
        public var rules: [Rule]
        /// What breaches over the window (misdelivery, leaks, a growing backlog, sustained rules).
        public var breaches: [String]
        /// How long the judgement took (ms): it is made again no sooner than 20 times that.
        public var costMs: Double
    }

    public struct Latency: Sendable, Codable, Equatable {
        public var p50: Double
        public var p99: Double
        public var count: Int
    }

    public struct Rule: Sendable, Codable, Equatable {
        public var metric: String
        public var expression: String
        /// `default` for a rule of the default gate.
        public var origin: String?
        public var unit: String
        /// Over the sliding window, and over the run so far.
        public var windowMeasured: Double?
        public var soFarMeasured: Double?
        /// It fails over the window (something was measured, and it broke the rule).
        public var windowFailed: Bool
        /// `ok`, `breaching` (fails over the window), `failed` (fails over the run so far: the
        /// final report would say so if the run ended now), `waiting` (nothing measured yet).
        public var state: String
    }
}

extension LiveFrame {
    /// A frame with nothing recorded yet: a followed run before its first replay.
    package static func empty(devices: Int) -> LiveFrame {
        LiveFrame(
            second: 0, phase: "arriving", devices: .init(planned: devices, ready: 0, failed: 0),
            totals: .init(sends: 0, sendFailures: 0, sendsDropped: 0, sendsLateStart: 0, received: 0, errors: 0), seconds: [], errors: [:],
            generator: .init(lateWakes: 0, longestWakeLagMs: 0, eventLagMs: 0), markers: [], judged: nil
        )
    }
}
