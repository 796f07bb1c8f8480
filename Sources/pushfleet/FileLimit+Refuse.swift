import ArgumentParser
import PushFleetCore
import PushFleetLauncher

extension FileLimit {
    /// Ends with the invalid-input code, saying why, when the scenario's fleet cannot fit.
    static func refuseBeyondLimit(_ scenario: Scenario, plan: FleetPlan, file: String) throws {
        guard let problem = problem(scenario, devices: plan.devices.count) else { return }
        FileHandleOutput.standardError("\(file): \(problem)")
        throw ExitCode(ExitStatus.invalidInput)
    }
}
