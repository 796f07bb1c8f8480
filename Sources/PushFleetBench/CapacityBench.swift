public import ArgumentParser
import Foundation
import Logging
import PushFleetCore
import PushFleetEngine
import PushFleetLauncher
import PushFleetReport
import PushFleetResults
import PushFleetScenario

/// Capacity searches against targets whose capacity is known in advance: the embedded push
/// service or the reference backend given a service rate. The search must find the rate that
/// was set, within ±5%, and name the hop it was set on; against the reference backend without a
/// knob it reports the backend's real capacity on this machine, or that the generator was the
/// limit.
public struct CapacityBench: AsyncParsableCommand, Sendable {
    public static let configuration = CommandConfiguration(
        commandName: "capacity",
        abstract: "Capacity searches against planted capacities (push service and backend service rates) and the bare reference backend."
    )

    @Option(help: "Push-service service rates to plant, pushes/s, comma-separated.") var rates = "150,400,800"
    @Option(help: "A backend send rate to plant, sends/s (0 for none).") var backendRate = 300.0
    @Flag(help: "Also search the reference backend with no knob set.") var reference = false
    @Option(help: "Each step's window after its warm-up.") var window = "6s"
    @Option(help: "Each step's warm-up.") var warmup = "2s"
    @Option(help: "Runs of each bracketing step.") var repeats = 2
    @Option(help: "How close the bracket must close (e.g. 5%).") var resolution = "5%"
    @Option(help: "Devices (one per user).") var devices = 200

    public init() {}

    public func validate() throws {
        guard !plantedRates.isEmpty || backendRate > 0 || reference else { throw ValidationError("nothing to search: give --rates, --backend-rate or --reference") }
        guard plantedRates.allSatisfy({ (1...100_000).contains($0) }) else { throw ValidationError("--rates: each between 1 and 100000") }
        guard backendRate == 0 || (1...100_000).contains(backendRate) else { throw ValidationError("--backend-rate: between 1 and 100000, or 0") }
        guard (1...10).contains(repeats), (10...100_000).contains(devices) else { throw ValidationError("--repeats 1–10, --devices 10–100000") }
        _ = try Bench.duration(window, flag: "--window")
        _ = try Bench.duration(warmup, flag: "--warmup")
    }

    private var plantedRates: [Double] {
        rates.split(separator: ",").compactMap { Double($0.trimmingCharacters(in: .whitespaces)) }
    }

    struct Search {
        var label: String
        /// `push_service`, `backend`, or nil for no knob.
        var hop: String?
        var rate: Double?
        var yaml: String
    }

    public func run() async throws {
        var searches = plantedRates.map { rate in
            Search(label: "push service at \(CapacityResult.format(rate))/s", hop: "push_service", rate: rate, yaml: yaml(start: rate / 3, max: rate * 4, fault: "pns: { service_rate: \(rate)/s }"))
        }
        if backendRate > 0 {
            searches.append(
                Search(label: "backend at \(CapacityResult.format(backendRate))/s", hop: "backend", rate: backendRate, yaml: yaml(start: backendRate / 3, max: backendRate * 4, fault: "backend_send_rate: \(backendRate)/s"))
            )
        }
        if reference { searches.append(Search(label: "reference backend, no knob", hop: nil, rate: nil, yaml: yaml(start: 200, max: 12_800, fault: nil))) }
        var rows: [[String]] = [["target", "set", "capacity found", "bracket", "error", "hop named", "CPU at first fail", "steps", "minutes", "check"]]
        var wrong: [String] = []
        for search in searches {
            FileHandleOutput.standardError("== \(search.label)")
            let scenario = try ScenarioLoader.parse(search.yaml, file: "bench-capacity")
            var logger = Logger(label: "pushfleet.bench")
            logger.logLevel = .warning
            let options = FleetRunner.Options(scenarioFile: "bench-capacity", scenarioText: search.yaml, version: PushFleetVersion.current, logger: logger)
            var runner = CapacityRunner(scenario: scenario, options: options)
            runner.stepDone = { FileHandleOutput.standardError($0) }
            let began = ContinuousClock.now
            let result = try await runner.run(required: nil, stop: StopControl())
            let minutes = (ContinuousClock.now - began) / .seconds(60)
            let found = result.capacity
            var error: Double?
            if let found, let rate = search.rate { error = (found - rate) / rate }
            var check = "–"
            if search.rate != nil {
                let close = error.map { abs($0) <= 0.05 } ?? false
                let hop = result.brokeAt?.hop == search.hop
                check = close && hop ? "ok" : "WRONG"
                if !(close && hop) { wrong.append("\(search.label): found \(found.map(CapacityResult.format) ?? "none") (\(result.outcome)), hop \(result.brokeAt?.hop ?? "none")") }
            } else {
                check = result.outcome == "generator_bound" ? "generator-bound" : result.outcome
            }
            let bound = "generator-bound at \(result.generatorBoundAt.map(CapacityResult.format) ?? "?")/s"
            let foundText = found.map { CapacityResult.format($0) + "/s" } ?? (result.outcome == "generator_bound" ? bound : "none")
            let bracket = "\(result.lastPass.map(CapacityResult.format) ?? "–")–\(result.firstFail.map(CapacityResult.format) ?? "–")"
            let errorText = error.map { String(format: "%+.1f%%", $0 * 100) } ?? "–"
            let set = search.rate.map { CapacityResult.format($0) + "/s" } ?? "–"
            // How busy the process (fleet and embedded system) was where the target failed.
            let cpu = result.steps.first { $0.load == result.firstFail }?.fleetCPUCores.map { String(format: "%.2f of %d cores", $0, result.cores) } ?? "–"
            let row: [String] = [
                search.label, set, foundText, bracket, errorText, result.brokeAt?.hop ?? "–", cpu, String(result.steps.count),
                String(format: "%.1f", minutes), check,
            ]
            rows.append(row)
            FileHandleOutput.standardError(result.summary)
        }
        let widths = rows[0].indices.map { column in rows.map { $0[column].count }.max() ?? 0 }
        FileHandleOutput.standardOutput(
            "\nbench capacity (embedded system in this process; each step a run of its own; window \(window) after \(warmup), repeats \(repeats), resolution \(resolution))\n"
                + rows.map { row in row.enumerated().map { $1.padding(toLength: widths[$0], withPad: " ", startingAt: 0) }.joined(separator: "  ") }.joined(separator: "\n")
        )
        guard wrong.isEmpty else { throw BenchFailure("a planted capacity was not found within ±5% at its hop: " + wrong.joined(separator: "; ")) }
    }

    /// One device per user on APNs, one push per send, the SLO of scenarios/capacity.yaml.
    private func yaml(start: Double, max: Double, fault: String?) -> String {
        """
        name: bench-capacity
        seed: 11
        target: embedded
        fleet:
          users: \(devices)
          devices_per_user: 1
          platforms: { apns: 1 }
        lifecycle: [login, register, connect, receive]
        traffic:
          - { name: plain, kind: plain, platforms: [apns], rate: 10/s, duration: 1s, max_in_flight: 4000 }
        \(fault.map { "faults:\n  - at: 0s\n    \($0)" } ?? "")
        deadline: 5s
        grace: 1s
        thresholds:
          delivery.latency: ["p(99) < 250ms"]
          delivery.lost_ratio: ["value <= 0.001"]
        capacity:
          start: \(String(format: "%.2f", start))/s
          max: \(String(format: "%.2f", max))/s
          factor: 2
          resolution: \(resolution)
          warmup: \(warmup)
          window: \(window)
          repeats: \(repeats)
        """
    }
}
