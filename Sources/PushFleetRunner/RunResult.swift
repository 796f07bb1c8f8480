public import PushFleetCore

/// Everything a run measured, as `run.json` holds it; every report file is rendered from this.
public struct RunResult: Sendable, Codable {
    public struct Info: Sendable, Codable {
        public var tool: String
        public var version: String
        /// Random per run; every nonce and device token of the run carries it.
        public var runID: String?
        public var scenario: String
        public var scenarioFile: String
        public var scenarioText: String
        public var seed: UInt64
        public var target: String
        public var backendURL: String
        public var pushServiceURL: String
        public var host: String
        public var cores: Int
        public var memoryBytes: UInt64
        public var os: String
        /// ISO 8601, UTC.
        public var startedAt: String
        public var endedAt: String
        public var durationSeconds: Double
        public var aborted: Bool
        public var abortReason: String?
        /// Seconds from the run's start when traffic began and ended.
        public var trafficStartSecond: Double
        public var trafficEndSecond: Double
    }

    /// One operation's numbers; latencies in milliseconds.
    public struct Operation: Sendable, Codable {
        public var name: String
        /// `corrected` (from the intended start), `raw` (from the actual start), or `closed`
        /// for operations that have no schedule.
        public var measure: String
        public var count: Int
        public var failures: Int
        public var rps: Double
        public var minMs: Double
        public var p50Ms: Double
        public var p90Ms: Double
        public var p95Ms: Double
        public var p99Ms: Double
        public var p999Ms: Double
        public var maxMs: Double
        public var meanMs: Double
    }

    public struct UserRow: Sendable, Codable {
        public var user: String
        public var devices: Int
        public var counts: DeliveryLedger.Counts
        public var p50Ms: Double?
        public var p99Ms: Double?
    }

    public struct Second: Sendable, Codable {
        public var second: Int
        public var devicesReady: Int
        public var sends: Int
        public var sendFailures: Int
        public var sendsDropped: Int
        public var received: Int
        public var misdelivered: Int
        public var errors: Int
        /// Errors in this second by class (classes are a bounded set).
        public var errorsByClass: [String: Int]?
        public var deliveryP50Ms: Double?
        public var deliveryP99Ms: Double?
    }

    public struct ErrorRow: Sendable, Codable {
        public var errorClass: String
        public var count: Int
        public var firstSecond: Int
        public var lastSecond: Int
    }

    public struct ThresholdResult: Sendable, Codable {
        public var metric: String
        public var expression: String
        /// `default` for a rule of the default gate, nil for the scenario's own.
        public var origin: String?
        /// The measured value in the expression's terms (ms for latencies).
        public var measured: Double?
        public var unit: String
        public var passed: Bool
    }

    public struct Marker: Sendable, Codable {
        public var second: Double
        public var label: String
    }

    public struct Devices: Sendable, Codable {
        public var planned: Int
        public var ready: Int
        public var failed: Int
        public var byPlatform: [String: Int]
    }

    public var info: Info
    public var devices: Devices
    public var operations: [Operation]
    /// Latency histograms by metric (`delivery`, `delivery.raw`, …), sparse and lossless.
    public var histograms: [String: LatencyHistogram]
    public var delivery: DeliveryLedger.Counts
    public var deliveryByPlatform: [String: DeliveryLedger.Counts]
    public var counters: [String: Double]
    public var users: [UserRow]
    public var timeseries: [Second]
    public var errors: [ErrorRow]
    public var thresholds: [ThresholdResult]
    public var markers: [Marker]
    /// The first incidents of each outcome (see ``Incident``), and how many there were in all.
    public var incidents: [Incident]?
    public var incidentTotals: [String: Int]?

    /// Evidence of one pair or push that went wrong, with names rather than indices.
    public struct Incident: Sendable, Codable {
        public var outcome: String
        public var send: Int?
        public var sendKind: String?
        public var sender: String?
        public var recipient: String?
        /// The device that received (or was expected to receive), its user and platform.
        public var device: Int?
        public var deviceUser: String?
        public var platform: String?
        /// Seconds from the run's start.
        public var sendStartSecond: Double?
        public var eventSecond: Double?
        public var detail: String
    }

    /// True when every threshold held.
    public var passed: Bool { thresholds.allSatisfy(\.passed) }
}
