import PushFleetCore
public import PushFleetLedger

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
        /// The rule (`metric: expression`) that stopped the run, failed over the live window
        /// (`abort_on_fail`); the run then exits 99.
        public var abortedBy: String? = nil
        /// The run's first instant, wall-clock nanoseconds since 1970 (`startedAt` is to the
        /// millisecond): its traces' spans are placed by it, beside spans other processes timed.
        public var startedAtNanoseconds: Int64? = nil
        /// Seconds from the run's start when traffic began and ended.
        public var trafficStartSecond: Double
        public var trafficEndSecond: Double
        /// Whether the run's requests carried W3C `traceparent` (a send's trace id derives from
        /// the run id and the send id: ``TraceIdentity/send(run:id:)``). Nil in older run.json.
        public var traceContext: Bool?
        /// Where an incident's trace is shown, `{trace_id}` standing for its id (`--trace-url`).
        public var traceURL: String?

        package init(
            tool: String,
            version: String,
            runID: String? = nil,
            scenario: String,
            scenarioFile: String,
            scenarioText: String,
            seed: UInt64,
            target: String,
            backendURL: String,
            pushServiceURL: String,
            host: String,
            cores: Int,
            memoryBytes: UInt64,
            os: String,
            startedAt: String,
            endedAt: String,
            durationSeconds: Double,
            aborted: Bool,
            abortReason: String? = nil,
            trafficStartSecond: Double,
            trafficEndSecond: Double
        ) {
            self.tool = tool
            self.version = version
            self.runID = runID
            self.scenario = scenario
            self.scenarioFile = scenarioFile
            self.scenarioText = scenarioText
            self.seed = seed
            self.target = target
            self.backendURL = backendURL
            self.pushServiceURL = pushServiceURL
            self.host = host
            self.cores = cores
            self.memoryBytes = memoryBytes
            self.os = os
            self.startedAt = startedAt
            self.endedAt = endedAt
            self.durationSeconds = durationSeconds
            self.aborted = aborted
            self.abortReason = abortReason
            self.trafficStartSecond = trafficStartSecond
            self.trafficEndSecond = trafficEndSecond
        }
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

        package init(
            name: String,
            measure: String,
            count: Int,
            failures: Int,
            rps: Double,
            minMs: Double,
            p50Ms: Double,
            p90Ms: Double,
            p95Ms: Double,
            p99Ms: Double,
            p999Ms: Double,
            maxMs: Double,
            meanMs: Double
        ) {
            self.name = name
            self.measure = measure
            self.count = count
            self.failures = failures
            self.rps = rps
            self.minMs = minMs
            self.p50Ms = p50Ms
            self.p90Ms = p90Ms
            self.p95Ms = p95Ms
            self.p99Ms = p99Ms
            self.p999Ms = p999Ms
            self.maxMs = maxMs
            self.meanMs = meanMs
        }
    }

    public struct UserRow: Sendable, Codable {
        public var user: String
        public var devices: Int
        public var counts: DeliveryLedger.Counts
        public var p50Ms: Double?
        public var p99Ms: Double?

        package init(
            user: String,
            devices: Int,
            counts: DeliveryLedger.Counts,
            p50Ms: Double? = nil,
            p99Ms: Double? = nil
        ) {
            self.user = user
            self.devices = devices
            self.counts = counts
            self.p50Ms = p50Ms
            self.p99Ms = p99Ms
        }
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

        package init(
            second: Int,
            devicesReady: Int,
            sends: Int,
            sendFailures: Int,
            sendsDropped: Int,
            received: Int,
            misdelivered: Int,
            errors: Int,
            errorsByClass: [String: Int]? = nil,
            deliveryP50Ms: Double? = nil,
            deliveryP99Ms: Double? = nil
        ) {
            self.second = second
            self.devicesReady = devicesReady
            self.sends = sends
            self.sendFailures = sendFailures
            self.sendsDropped = sendsDropped
            self.received = received
            self.misdelivered = misdelivered
            self.errors = errors
            self.errorsByClass = errorsByClass
            self.deliveryP50Ms = deliveryP50Ms
            self.deliveryP99Ms = deliveryP99Ms
        }
    }

    public struct ErrorRow: Sendable, Codable {
        public var errorClass: String
        public var count: Int
        public var firstSecond: Int
        public var lastSecond: Int

        package init(
            errorClass: String,
            count: Int,
            firstSecond: Int,
            lastSecond: Int
        ) {
            self.errorClass = errorClass
            self.count = count
            self.firstSecond = firstSecond
            self.lastSecond = lastSecond
        }
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

        package init(
            metric: String,
            expression: String,
            origin: String? = nil,
            measured: Double? = nil,
            unit: String,
            passed: Bool
        ) {
            self.metric = metric
            self.expression = expression
            self.origin = origin
            self.measured = measured
            self.unit = unit
            self.passed = passed
        }
    }

    public struct Marker: Sendable, Codable {
        public var second: Double
        public var label: String

        package init(
            second: Double,
            label: String
        ) {
            self.second = second
            self.label = label
        }
    }

    public struct Devices: Sendable, Codable {
        public var planned: Int
        public var ready: Int
        public var failed: Int
        public var byPlatform: [String: Int]

        package init(
            planned: Int,
            ready: Int,
            failed: Int,
            byPlatform: [String: Int]
        ) {
            self.planned = planned
            self.ready = ready
            self.failed = failed
            self.byPlatform = byPlatform
        }
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
    /// Delivered pairs in the traces' sample (`tracing.sample`), at most ``sampledLimit``.
    public var sampledDeliveries: [SampledDelivery]?
    public static let sampledLimit = 1000
    /// Where the pushes went and why pairs were lost; nil in runs from before it was recorded.
    public var hops: Hops?
    /// Whether the generator kept up; nil in runs from before it was recorded.
    public var generator: Generator?
    /// The span judged on its own, when the run was asked to (a capacity step's).
    public var window: Window?
    /// Each network fault's window and its own ledger; nil for a run without network faults.
    public var networkFaults: [NetworkFaultWindow]? = nil

    package init(
        info: Info,
        devices: Devices,
        operations: [Operation],
        histograms: [String: LatencyHistogram],
        delivery: DeliveryLedger.Counts,
        deliveryByPlatform: [String: DeliveryLedger.Counts],
        counters: [String: Double],
        users: [UserRow],
        timeseries: [Second],
        errors: [ErrorRow],
        thresholds: [ThresholdResult],
        markers: [Marker],
        incidents: [Incident]? = nil,
        incidentTotals: [String: Int]? = nil,
        hops: Hops? = nil,
        generator: Generator? = nil,
        window: Window? = nil
    ) {
        self.window = window
        self.hops = hops
        self.generator = generator
        self.info = info
        self.devices = devices
        self.operations = operations
        self.histograms = histograms
        self.delivery = delivery
        self.deliveryByPlatform = deliveryByPlatform
        self.counters = counters
        self.users = users
        self.timeseries = timeseries
        self.errors = errors
        self.thresholds = thresholds
        self.markers = markers
        self.incidents = incidents
        self.incidentTotals = incidentTotals
    }

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
        /// When the send's answer came (nil in older run.json).
        public var sendEndSecond: Double?
        public var eventSecond: Double?
        public var detail: String
        /// For a lost, late or unverified pair: the hop it went wrong at, and why
        /// (`refused 403 InvalidProviderToken`).
        public var hop: String?
        public var reason: String?
        /// For a lost or late pair whose push the push service reported: its latest step
        /// (`refused`, `dropped`, `held`, `written`, …), when the push service refused or
        /// accepted it and when that step came (seconds from the run's start), and the span id of
        /// the provider request that handed it over, when that request carried the send's trace;
        /// `pushUntraced` when it carried none or another trace's (docs/tracing.md).
        public var pushStep: String?
        public var pushSecond: Double?
        public var pushStepSecond: Double?
        public var pushSpan: String?
        public var pushUntraced: Bool?

        package init(
            outcome: String,
            send: Int? = nil,
            sendKind: String? = nil,
            sender: String? = nil,
            recipient: String? = nil,
            device: Int? = nil,
            deviceUser: String? = nil,
            platform: String? = nil,
            sendStartSecond: Double? = nil,
            sendEndSecond: Double? = nil,
            eventSecond: Double? = nil,
            detail: String,
            hop: String? = nil,
            reason: String? = nil
        ) {
            self.hop = hop
            self.reason = reason
            self.outcome = outcome
            self.send = send
            self.sendKind = sendKind
            self.sender = sender
            self.recipient = recipient
            self.device = device
            self.deviceUser = deviceUser
            self.platform = platform
            self.sendStartSecond = sendStartSecond
            self.sendEndSecond = sendEndSecond
            self.eventSecond = eventSecond
            self.detail = detail
        }
    }

    /// True when every threshold held and the generator kept up.
    public var passed: Bool { thresholds.allSatisfy(\.passed) && generator?.bound != true }
}
