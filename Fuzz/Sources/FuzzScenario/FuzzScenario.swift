import FuzzDriver
import PushFleetCore
import PushFleetScenario

/// Any bytes as a scenario file: a validated scenario or issues with a position, never a crash or
/// a hang. A valid scenario is also taken as far as `pushfleet validate` and a run's set-up take
/// it without running: its default gate, its fleet plan and the first sends of every sender; its
/// fleet and its senders' schedules must be small enough to plan in memory.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzScenario(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    // A folder that does not exist: a relative credentials path names no file.
    let file = "fuzz-missing-folder/scenario.yaml"
    let scenario: Scenario
    do {
        scenario = try ScenarioLoader.parse(text, file: file)
    } catch {
        guard !error.issues.isEmpty else { fatalError("a scenario was refused with no issue") }
        for issue in error.issues {
            guard issue.file == file, issue.line >= 1, issue.column >= 1, !issue.message.isEmpty else {
                fatalError("an issue without a position or message: \(issue)")
            }
        }
        return 0
    }
    _ = scenario.effectiveThresholds
    let devices = scenario.fleet.users.multipliedReportingOverflow(by: scenario.fleet.devicesPerUser.maximum)
    guard !devices.overflow, devices.partialValue <= Scenario.Fleet.maximumDevices else {
        fatalError("a fleet too large to plan was accepted: \(scenario.fleet.users) users")
    }
    // Plans grow with the fleet; a fleet this small covers the same arithmetic.
    if devices.partialValue <= 5_000 {
        let plan = FleetPlan(scenario: scenario)
        guard plan.devices.allSatisfy({ $0.arrival >= 0 }) else { fatalError("a device arrives before the start") }
    }
    for traffic in scenario.traffic {
        // A run computes every intended start up front.
        guard traffic.profile.expectedCount <= Double(Scenario.Traffic.maximumSends) else {
            fatalError("sender \(traffic.name) plans \(traffic.profile.expectedCount) sends and was accepted")
        }
        let instants = traffic.profile.instants(limit: 2_000)
        guard zip(instants, instants.dropFirst()).allSatisfy({ $0 <= $1 }), instants.allSatisfy({ $0 >= 0 }) else {
            fatalError("sender \(traffic.name)'s schedule is not in order")
        }
        _ = traffic.profile.expectedCount
    }
    return 0
}

@main
enum FuzzScenario {
    static func main() {
        FuzzDriver.main(fuzzScenario)
    }
}
