import ArgumentParser
import PushFleetCore
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
                if explain { FileHandleOutput.standardOutput(APIExplain.text(scenario, file: file)) }
            } catch {
                failed = true
                FileHandleOutput.standardError(error.description)
            }
        }
        if failed { throw ExitCode(ExitStatus.invalidInput) }
    }
}
