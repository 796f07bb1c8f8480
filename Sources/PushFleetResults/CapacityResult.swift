public import PushFleetCore

/// Everything a capacity search found, as `capacity.json` holds it; `steps.csv` and the
/// capacity report are rendered from this.
public struct CapacityResult: Sendable, Codable {
    public var tool = "pushfleet"
    public var version: String
    public var scenario: String
    public var scenarioFile: String
    public var target: String
    public var host: String
    public var cores: Int
    public var startedAt: String
    public var endedAt: String
    /// `rate` or `devices`.
    public var vary: String
    /// `sends/s` or `devices`.
    public var unit: String
    /// The rules each step was judged by (the scenario's thresholds and the default gate), beside
    /// the checks every step has: no misdelivery, no leak, a bounded backlog that does not grow.
    public var slo: [String]
    public var warmupSeconds: Double
    public var windowSeconds: Double
    /// How the search ended (``CapacitySearch/Outcome``), or `aborted`.
    public var outcome: String
    /// The highest load every run of which met the SLO: the capacity found.
    public var capacity: Double?
    /// The last passing and first failing loads.
    public var lastPass: Double?
    public var firstFail: Double?
    /// Where the generator was the limit, when it was.
    public var generatorBoundAt: Double?
    /// The least capacity asked for (`--require`, `capacity.require`), and whether it was met.
    public var required: Double?
    public var meetsRequirement: Bool?
    /// Loads whose repeated runs disagreed, or that passed above a failing load.
    public var nonMonotonic: [Double]
    /// The bracket's repeated runs: per load, the spread of delivery p99 and throughput.
    public var spread: [Spread]
    /// Which hop's latency or losses grew first between the last pass and the first fail.
    public var brokeAt: BrokeAt?
    /// Kneedle's knees of achieved throughput and of delivery p99 against offered load.
    public var kneeOfThroughput: Double?
    public var kneeOfP99: Double?
    /// The Universal Scalability Law fitted to achieved throughput against offered load, when
    /// the steps support a fit.
    public var usl: USLFit?
    /// The result in one sentence.
    public var summary: String
    /// Why the search ended before its outcome (a step that could not run, a signal).
    public var failure: String?
    public var steps: [CapacityStep]

    public init(
        version: String, scenario: String, scenarioFile: String, target: String, host: String, cores: Int, startedAt: String, endedAt: String,
        vary: String, unit: String, slo: [String], warmupSeconds: Double, windowSeconds: Double, outcome: String, steps: [CapacityStep]
    ) {
        self.version = version
        self.scenario = scenario
        self.scenarioFile = scenarioFile
        self.target = target
        self.host = host
        self.cores = cores
        self.startedAt = startedAt
        self.endedAt = endedAt
        self.vary = vary
        self.unit = unit
        self.slo = slo
        self.warmupSeconds = warmupSeconds
        self.windowSeconds = windowSeconds
        self.outcome = outcome
        self.nonMonotonic = []
        self.spread = []
        self.summary = ""
        self.steps = steps
    }

    public struct Spread: Sendable, Codable, Equatable {
        public var load: Double
        public var runs: Int
        public var verdicts: [String]
        public var p99MinMs: Double?
        public var p99MaxMs: Double?
        public var throughputMin: Double
        public var throughputMax: Double

        public init(load: Double, runs: Int, verdicts: [String], p99MinMs: Double?, p99MaxMs: Double?, throughputMin: Double, throughputMax: Double) {
            self.load = load
            self.runs = runs
            self.verdicts = verdicts
            self.p99MinMs = p99MinMs
            self.p99MaxMs = p99MaxMs
            self.throughputMin = throughputMin
            self.throughputMax = throughputMax
        }
    }

    public struct BrokeAt: Sendable, Codable, Equatable {
        /// `backend`, `hub`, `push_service`, `device` or `fetch`.
        public var hop: String
        /// `losses` (most lost pairs were lost there), `refusals` (it refused pushes or failed
        /// sends) or `latency` (its p99 grew most).
        public var by: String
        public var load: Double
        public var sentence: String
        /// Traces of pairs that went wrong at that hop at that load (``CapacityStep/traces``).
        public var traces: [String]?

        public init(hop: String, by: String, load: Double, sentence: String, traces: [String]? = nil) {
            self.traces = traces
            self.hop = hop
            self.by = by
            self.load = load
            self.sentence = sentence
        }
    }
}

/// One step of a capacity search: the load it offered and what its window measured.
public struct CapacityStep: Sendable, Codable {
    public var index: Int
    /// `ladder`, `bisect` or `repeat`.
    public var phase: String
    /// Sends per second, or devices.
    public var load: Double
    /// `pass`, `fail`, `invalid` (the generator was the limit) or `stop`.
    public var verdict: String
    /// What failed, sustained over the window; why the generator was the limit.
    public var breaches: [String]
    public var generatorLimits: [String]
    public var offeredRate: Double
    public var throughput: Double
    public var devices: Int
    public var deliveryP50Ms: Double?
    public var deliveryP99Ms: Double?
    public var sendP99Ms: Double?
    public var lostRatio: Double
    public var lateRatio: Double
    public var expected: Int
    public var lost: Int
    public var backlog: [Int]
    /// Per hop (`backend`, `hub`, `push_service`, `device`, `fetch`): p50 and p99 in ms.
    public var hops: [String: HopLatency]
    /// Lost, late and unverified pairs by hop and cause, most first (at most ten rows).
    public var why: [RunResult.Why]
    /// Refusals by error class (`pns:apns:429:TooManyRequests`, `send:503`…).
    public var errors: [String: Int]
    public var fleetCPUCores: Double?
    public var durationSeconds: Double
    /// The step's own report folder, relative to the capacity report.
    public var report: String
    /// Trace ids of the step's incidents by the hop they were put at (at most three each), when
    /// its requests carried trace context: the traces to open for where it broke.
    public var traces: [String: [String]]?

    public struct HopLatency: Sendable, Codable, Equatable {
        public var p50Ms: Double
        public var p99Ms: Double

        public init(p50Ms: Double, p99Ms: Double) {
            self.p50Ms = p50Ms
            self.p99Ms = p99Ms
        }
    }

    public init(
        index: Int, phase: String, load: Double, verdict: String, breaches: [String], generatorLimits: [String], offeredRate: Double,
        throughput: Double, devices: Int, deliveryP50Ms: Double?, deliveryP99Ms: Double?, sendP99Ms: Double?, lostRatio: Double,
        lateRatio: Double, expected: Int, lost: Int, backlog: [Int], hops: [String: HopLatency], why: [RunResult.Why], errors: [String: Int],
        fleetCPUCores: Double?, durationSeconds: Double, report: String, traces: [String: [String]]? = nil
    ) {
        self.traces = traces
        self.index = index
        self.phase = phase
        self.load = load
        self.verdict = verdict
        self.breaches = breaches
        self.generatorLimits = generatorLimits
        self.offeredRate = offeredRate
        self.throughput = throughput
        self.devices = devices
        self.deliveryP50Ms = deliveryP50Ms
        self.deliveryP99Ms = deliveryP99Ms
        self.sendP99Ms = sendP99Ms
        self.lostRatio = lostRatio
        self.lateRatio = lateRatio
        self.expected = expected
        self.lost = lost
        self.backlog = backlog
        self.hops = hops
        self.why = why
        self.errors = errors
        self.fleetCPUCores = fleetCPUCores
        self.durationSeconds = durationSeconds
        self.report = report
    }
}
