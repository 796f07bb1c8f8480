extension RunResult {
    /// Whether pushfleet itself kept up with the load it was asked for. When it did not, the run
    /// is inconclusive: what it measured says more about the generator than about the target.
    public struct Generator: Sendable, Codable, Equatable {
        /// Sends whose sender woke more than 10 ms after the send's intended start: the fleet's
        /// own scheduling, not a slow target (a send waiting for a pooled connection is not one).
        public var lateWakes: Int
        public var lateWakeRatio: Double
        public var longestWakeLagMs: Double
        /// The longest an event waited for the recorder to apply it.
        public var eventLagMs: Double
        /// CPU the fleet process used over the traffic, in cores (the embedded system's included
        /// when it runs in the same process); nil when not measured.
        public var cpuCores: Double?
        public var cores: Int
        /// Sends dropped at `max_in_flight` although even the target's slowest answer could not
        /// have filled it at the offered rate.
        public var droppedWhileFast: Int
        /// Why the generator was the limit; empty when it was not.
        public var limits: [String]
        /// Said of a fleet process near its CPU limit that still kept up.
        public var notes: [String]
        /// pushfleet's push service over the traffic, as its event loops measured themselves;
        /// nil when it did not say (an older `serve`, or a run too short for a check).
        public var pushService: PushServiceLoad?

        package init(
            lateWakes: Int, lateWakeRatio: Double, longestWakeLagMs: Double, eventLagMs: Double, cpuCores: Double?, cores: Int,
            droppedWhileFast: Int, limits: [String], notes: [String]
        ) {
            self.lateWakes = lateWakes
            self.lateWakeRatio = lateWakeRatio
            self.longestWakeLagMs = longestWakeLagMs
            self.eventLagMs = eventLagMs
            self.cpuCores = cpuCores
            self.cores = cores
            self.droppedWhileFast = droppedWhileFast
            self.limits = limits
            self.notes = notes
        }

        /// The push service's event loops over the traffic: the busiest loop's thread CPU as a
        /// share of the wall time, and the timer checks that woke late (every request on a late
        /// loop waited about as long).
        public struct PushServiceLoad: Sendable, Codable, Equatable {
            public var loops: Int
            public var busiestLoopShare: Double
            public var checks: Int
            /// Checks that woke at least `lateThresholdMs` after they were due.
            public var lateChecks: Int
            public var lateThresholdMs: Double
            /// How late the late checks woke, on average (ms).
            public var meanLateMs: Double
            /// The share of its cores the push service's process used over the traffic, when it
            /// runs in a process of its own (`serve`); nil in the fleet's process, whose CPU the
            /// generator's own figures give.
            public var processCoreShare: Double?
            public var processCores: Int?
            /// Whether that process runs on the fleet's machine (its URL is a loopback address):
            /// the two then share the machine's cores.
            public var processOnFleetMachine: Bool?
            /// The busiest loop's share of the traffic spent running or ready and waiting for a
            /// core (nil when the push service does not say how long its loops waited).
            public var busiestLoopDemand: Double?

            public init(loops: Int, busiestLoopShare: Double, checks: Int, lateChecks: Int, lateThresholdMs: Double, meanLateMs: Double) {
                self.loops = loops
                self.busiestLoopShare = busiestLoopShare
                self.checks = checks
                self.lateChecks = lateChecks
                self.lateThresholdMs = lateThresholdMs
                self.meanLateMs = meanLateMs
            }

            public var lateShare: Double { checks > 0 ? Double(lateChecks) / Double(checks) : 0 }
        }

        public var bound: Bool { !limits.isEmpty }

        /// What to do about a generator that was the limit.
        public static let advice =
            "fewer devices or a lower rate per process, the servers in a process of their own (pushfleet serve), or the fleet in shards"
    }

    /// Metrics whose failure is the target's whatever the generator did: a push to the wrong
    /// user or a leak is wrong at any load.
    public static let correctnessMetrics: Set<String> = ["delivery.misdelivered", "delivery.misdelivered_ratio", "leaks", "delivery.duplicates"]

    /// The generator was the limit and nothing failed that no load excuses.
    public var inconclusive: Bool {
        guard generator?.bound == true else { return false }
        return thresholds.allSatisfy { $0.passed || !Self.correctnessMetrics.contains($0.metric) }
    }
}
