public import Prometheus
import PushFleetCore
package import PushFleetLedger
import Synchronization

/// Live OpenMetrics/Prometheus exposition of a run (`--metrics-listen`), through
/// swift-prometheus. Labels are low-cardinality only: operation, kind, result, error class,
/// outcome, platform — never a user or a device.
public final class LiveMetrics: Sendable {
    public let registry = PrometheusCollectorRegistry()
    let sendsOK: [Scenario.Traffic.Kind: Counter]
    let sendsFailed: [Scenario.Traffic.Kind: Counter]
    let sendsDropped: Counter
    let received: Counter
    /// The same pushes by the receiving device's platform.
    let receivedByPlatform: [Scenario.PlatformName: Counter]
    let devicesReady: Gauge
    let devicesFailed: Gauge
    let devicesPlanned: Gauge
    /// The latency buckets' exemplars (`LiveMetrics+OpenMetrics.swift`).
    let exemplarState = Mutex(ExemplarState())

    struct ExemplarState {
        var source: ExemplarSource?
        /// Per operation, one per bucket and one for +Inf.
        var byOperation: [String: [Exemplar?]] = [:]
    }

    static let buckets: [Duration] = [1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10_000].map { .milliseconds($0) }

    static func name(_ metric: String, unit: String, help: String) -> MetricNameDescriptor {
        MetricNameDescriptor(namespace: "pushfleet", metricName: metric, unitName: unit, helpText: help)
    }

    static var sends: MetricNameDescriptor { name("sends", unit: "total", help: "Sends answered, by kind and result") }
    static var operation: MetricNameDescriptor { name("operation_duration", unit: "seconds", help: "Latency per operation; sends and deliveries from their intended start") }
    static var errors: MetricNameDescriptor { name("errors", unit: "total", help: "Errors by class") }
    static var pairs: MetricNameDescriptor {
        name("delivery_pairs", unit: "", help: "Send-device pairs by outcome: so far during the run (sends a deadline old), final once it ends")
    }
    static var devices: MetricNameDescriptor { name("devices", unit: "", help: "Devices by state") }
    static var platformPairs: MetricNameDescriptor {
        name("delivery_pairs_by_platform", unit: "", help: "Send-device pairs by the device's platform and outcome, final once the run ends")
    }

    public init() {
        let registry = self.registry
        func counters(_ result: String) -> [Scenario.Traffic.Kind: Counter] {
            Dictionary(uniqueKeysWithValues: Scenario.Traffic.Kind.allCases.map {
                ($0, registry.makeCounter(descriptor: Self.sends, labels: [("kind", $0.rawValue), ("result", result)]))
            })
        }
        sendsOK = counters("ok")
        sendsFailed = counters("failed")
        sendsDropped = registry.makeCounter(descriptor: Self.name("sends_dropped", unit: "total", help: "Sends due while max_in_flight were open"))
        received = registry.makeCounter(descriptor: Self.name("pushes_received", unit: "total", help: "Pushes received by devices"))
        let byPlatform = Self.name("pushes_received_by_platform", unit: "total", help: "Pushes received by devices, by platform")
        receivedByPlatform = Dictionary(uniqueKeysWithValues: Scenario.PlatformName.allCases.map {
            ($0, registry.makeCounter(descriptor: byPlatform, labels: [("platform", $0.rawValue)]))
        })
        devicesReady = registry.makeGauge(descriptor: Self.devices, labels: [("state", "ready")])
        devicesFailed = registry.makeGauge(descriptor: Self.devices, labels: [("state", "failed")])
        devicesPlanned = registry.makeGauge(descriptor: Self.name("devices_planned", unit: "", help: "Devices the scenario plans"))
    }

    /// Counts a latency of `operation` (corrected, as live metrics carry).
    package func record(_ operation: String, nanoseconds: Int64) {
        latency(operation).recordNanoseconds(nanoseconds)
    }

    func latency(_ operation: String) -> DurationHistogram {
        registry.makeDurationHistogram(descriptor: Self.operation, labels: [("operation", operation)], buckets: Self.buckets)
    }

    func error(_ label: String) -> Counter {
        registry.makeCounter(descriptor: Self.errors, labels: [("class", label)])
    }

    package func setDevicesPlanned(_ count: Int) {
        devicesPlanned.set(to: Double(count))
    }

    /// Pair counts by outcome: the run's judgement so far while it lasts (of sends a deadline
    /// old, as the live page's), the final ones once its verdict is made.
    package func setOutcomes(_ counts: DeliveryLedger.Counts, byPlatform: [String: DeliveryLedger.Counts] = [:]) {
        // Singular outcome names, as the label values have always been.
        let singular = ["duplicates": "duplicate", "leaks": "leak"]
        for field in DeliveryLedger.Counts.fields {
            let outcome = singular[field.name] ?? field.name
            registry.makeGauge(descriptor: Self.pairs, labels: [("outcome", outcome)]).set(to: Double(counts[keyPath: field.path]))
            for (platform, platformCounts) in byPlatform {
                registry.makeGauge(descriptor: Self.platformPairs, labels: [("platform", platform), ("outcome", outcome)])
                    .set(to: Double(platformCounts[keyPath: field.path]))
            }
        }
    }

    /// The registry in the Prometheus text format, as `GET /metrics` serves it.
    public func exposition() -> [UInt8] {
        registry.emitToBuffer()
    }
}
