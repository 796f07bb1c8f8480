public import ArgumentParser
import Foundation
import Logging
import PushFleetCore
import PushFleetEngine
import PushFleetLauncher
import PushFleetResults
import PushFleetScenario
import PushFleetServerSupport
import ServiceLifecycle

/// Coordinated omission: an open-model sender against a target that stalls for `stall` every
/// `every`. While it stalls, sends keep coming due; measured from their intended start they wait
/// up to the whole stall, so the analytic distribution is: a share stall/every of the sends wait
/// uniformly between 0 and the stall, the rest only the service time. p(q) is then
/// stall × (1 − (1 − q) × every / stall) for the tail above the unaffected share.
public struct OmissionBench: AsyncParsableCommand, Sendable {
    public static let configuration = CommandConfiguration(
        commandName: "omission",
        abstract: "Corrected vs raw latency against a target that stalls periodically, compared with the analytic values."
    )

    @Option(help: "Send rate (sends/s).") var rate = 1000
    @Option(help: "Run length; a whole number of stall periods.") var duration = "60s"
    @Option(help: "Stall length.") var stall = "1s"
    @Option(help: "Stall period.") var every = "10s"

    public init() {}

    public func validate() throws {
        let period = try Bench.duration(every, flag: "--every")
        let length = try Bench.duration(stall, flag: "--stall")
        guard length > .zero, length < period else { throw ValidationError("--stall must be shorter than --every") }
        guard rate > 0 else { throw ValidationError("--rate must be above 0") }
        _ = try Bench.duration(duration, flag: "--duration")
    }

    public func run() async throws {
        let period = try Bench.duration(every, flag: "--every")
        let length = try Bench.duration(stall, flag: "--stall")
        var logger = Logger(label: "pushfleet.bench")
        logger.logLevel = .warning
        let target = StallingTarget(period: period, stall: length)
        let bound = Readiness<ListenAddress>()
        let group = ServiceGroup(configuration: .init(services: [.init(service: target.makeService(bound: bound, logger: logger))], logger: logger))
        let server = Task { try await group.run() }
        defer { server.cancel() }
        let url = try await bound.value().httpURL

        // A fleet with no device steps: only the sender runs, so the target is the whole path.
        let profile = LoadProfile.constant(Rate(perSecond: Double(rate)), for: try Bench.duration(duration, flag: "--duration"))
        var scenario = Scenario(
            name: "bench-omission", target: .external(backend: url, pushService: .url(url)), fleet: .init(users: 10), lifecycle: [],
            traffic: [.init(name: "open", kind: .plain, platforms: [.apns], profile: profile, maxInFlight: 1_000_000)],
            deadline: .seconds(5), grace: .zero
        )
        scenario.api = ScenarioLoader.preset("appbackend")
        var options = FleetRunner.Options(scenarioFile: "bench", scenarioText: "", version: PushFleetVersion.current, logger: logger) {
            FileHandleOutput.standardError($0)
        }
        options.beforeTraffic = { target.align() }
        let result = try await FleetRunner(scenario: scenario, options: options).run()
        await group.triggerGracefulShutdown()

        let share = length.seconds / period.seconds
        func analytic(_ q: Double) -> Double {
            // Tail fraction above x is share × (1 − x / stall).
            let tail = 1 - q / 100
            return tail >= share - 1e-9 ? 0 : length.seconds * 1000 * (1 - tail / share)
        }
        let corrected = result.histograms["http.send"] ?? LatencyHistogram()
        let raw = result.histograms["http.send.raw"] ?? LatencyHistogram()
        var lines = ["", "bench omission: \(rate)/s for \(duration), target stalls \(stall) every \(every) (\(corrected.count) sends)",
            "percentile  analytic ms  corrected ms  error   raw ms  raw / analytic"]
        var worst = 0.0
        for q in [50.0, 95.0, 99.0, 99.9] {
            let expected = analytic(q)
            let c = Double(corrected.percentile(q)) / 1e6
            let r = Double(raw.percentile(q)) / 1e6
            let error = expected > 0 ? String(format: "%+.1f%%", (c - expected) / expected * 100) : "  —  "
            let rawShare = expected > 0 ? String(format: "%.3f", r / expected) : "—"
            if q >= 99 && expected > 0 { worst = max(worst, abs(c - expected) / expected) }
            lines.append(
                String(format: "p%-9@  %11.1f  %12.1f  %6@  %7.1f  %@", SVGChartNumber.text(q) as NSString, expected, c, error as NSString, r, rawShare as NSString)
            )
        }
        lines.append("corrected is measured from each send's intended start, raw from when the call was made.")
        lines.append(String(format: "target: corrected p99 and p99.9 within 10%% of analytic: %@ (worst %.1f%%)", worst <= 0.10 ? "met" : "NOT met", worst * 100))
        FileHandleOutput.standardOutput(lines.joined(separator: "\n"))
        guard corrected.count > 0 else { throw BenchFailure("no sends were measured") }
    }
}

/// A percentile as the table names it: 99, 99.9.
private enum SVGChartNumber {
    static func text(_ value: Double) -> String { value == value.rounded() ? String(Int(value)) : String(value) }
}
