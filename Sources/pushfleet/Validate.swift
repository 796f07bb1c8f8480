import ArgumentParser
import PushFleetCore
import PushFleetLauncher
import PushFleetResults
import PushFleetScenario

struct Validate: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check scenario files and report every problem; exit 2 if any.",
        discussion: """
            A fleet this machine cannot hold (open-files limit, the embedded push service's device cap) is a problem too, as run would refuse it. \
            Warnings (a value the api extracts and nothing uses …) are printed on stderr and do not change the exit code.
            """
    )

    @Argument(help: "Scenario files.") var files: [String]
    @Flag(help: "Print the requests each device and sender will make, with example values.") var explain = false

    func run() throws {
        var failed = false
        for file in files {
            do {
                let source = try ScenarioSource.read(file)
                source.printWarnings()
                let scenario = source.scenario
                let plan = FleetPlan(scenario: scenario)
                // What `run` would refuse here, said here too: the fleet's sockets against this
                // machine's open-files limit (and the embedded push service's device cap).
                if let problem = FileLimit.problem(scenario, devices: plan.devices.count) {
                    failed = true
                    FileHandleOutput.standardError("\(file): \(problem)")
                    continue
                }
                FileHandleOutput.standardOutput(
                    "ok: \(file): \(scenario.fleet.users) users, \(plan.devices.count) devices, \(scenario.traffic.count) senders, \(scenario.thresholds.count) thresholds, \(scenario.effectiveThresholds.count - scenario.thresholds.count) default-gate rules, api \(scenario.api?.name ?? "none")"
                )
                if let capacity = scenario.capacity { FileHandleOutput.standardOutput("  " + Self.describe(capacity)) }
                if explain { FileHandleOutput.standardOutput(APIExplain.text(scenario, file: file)) }
            } catch {
                failed = true
                FileHandleOutput.standardError(error.description)
            }
        }
        if failed { throw ExitCode(ExitStatus.invalidInput) }
    }

    /// The capacity search a scenario asks for, in one line.
    static func describe(_ c: Scenario.Capacity) -> String {
        func load(_ value: Double) -> String { c.vary == .rate ? "\(CapacityResult.format(value))/s" : "\(CapacityResult.format(value)) devices" }
        return "capacity: vary \(c.vary.rawValue) from \(load(c.start)) ×\(c.factor) up to \(load(c.maximum)), to \(c.resolution * 100)%, "
            + "\(DurationText.format(c.warmup)) warm-up + \(DurationText.format(c.window)) window per step, \(c.repeats) runs of the bracket"
    }
}
