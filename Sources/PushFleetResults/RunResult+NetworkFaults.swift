public import PushFleetLedger

extension RunResult {
    /// One network fault's window and what befell the pairs it touched: the sends that started
    /// within it, to the devices it cut off or slowed (docs/network-faults.md).
    public struct NetworkFaultWindow: Sendable, Codable, Equatable {
        /// Its place in `network.faults`, from 1: what `--only-fault` takes.
        public var fault: Int
        public var label: String
        /// From the start of the run, as the markers are.
        public var startSecond: Double
        public var endSecond: Double
        public var devices: Int
        public var delivery: DeliveryLedger.Counts
        /// The same by platform: what each platform's promise made of the fault.
        public var deliveryByPlatform: [String: DeliveryLedger.Counts] = [:]
        /// Each hop's p50 and p99 (ms) over the window's delivered and late pairs: what the
        /// fault cost, hop by hop (`backend`, `hub`, `push_service`, `device`, `fetch`).
        public var hopP50Ms: [String: Double]
        public var hopP99Ms: [String: Double]

        public init(
            fault: Int, label: String, startSecond: Double, endSecond: Double, devices: Int, delivery: DeliveryLedger.Counts,
            hopP50Ms: [String: Double] = [:], hopP99Ms: [String: Double] = [:]
        ) {
            self.fault = fault
            self.label = label
            self.startSecond = startSecond
            self.endSecond = endSecond
            self.devices = devices
            self.delivery = delivery
            self.hopP50Ms = hopP50Ms
            self.hopP99Ms = hopP99Ms
        }

        /// Pairs that break a promise: lost, duplicated, misdelivered, leaked, stale.
        public var failing: Int {
            delivery.lost + delivery.duplicates + delivery.misdelivered + delivery.leaks + delivery.stale + delivery.sentToDeadToken
        }
    }
}
