import ArgumentParser
import Foundation
import Logging
import PushFleetCore
import PushFleetEngine
import PushFleetLauncher
import PushFleetLedger
import PushFleetResults
import Synchronization

struct APICommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "api", abstract: "Work with a scenario's api description.", subcommands: [Check.self]
    )

    struct Check: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Run one user with two devices through every step of a scenario's api against its target, printing each request and answer.",
            discussion: """
                The user's devices log in, connect, register and receive one send of each kind the \
                scenario's traffic uses (from the user to itself), fetch what they name, and unregister \
                when the api can. Exit codes: 0 every step passed and every push was delivered; 99 a \
                step failed or a push was not delivered; 2 invalid input.
                """
        )

        @Argument(help: "The scenario file (YAML).") var scenario: String
        @Flag(help: "Print only the summary, not each request and answer.") var quiet = false

        func run() async throws {
            let source = try ScenarioSource.load(scenario)
            let check = APICheck.scenario(from: source.scenario)
            var logger = Logger(label: "pushfleet.api-check")
            logger.logLevel = .warning
            var options = FleetRunner.Options(provenance: source.provenance, logger: logger)
            let tally = APICheck.Tally()
            let quiet = self.quiet
            options.trace = { trace in
                tally.add(trace)
                if !quiet { FileHandleOutput.standardOutput(APICheck.describe(trace)) }
            }
            let result = try await FleetRunner(scenario: check, options: options).run()
            let (report, passed) = APICheck.summary(tally, result)
            FileHandleOutput.standardOutput(report)
            if !passed { throw ExitCode(ExitStatus.thresholdFailed) }
        }
    }
}

/// One user and two devices through every step, each request printed with its answer.
enum APICheck {
    /// The scenario cut down to one user with two devices and one send of each kind it uses, to
    /// itself; a departure at the end when the api can unregister.
    static func scenario(from scenario: Scenario) -> Scenario {
        var check = scenario
        check.name = scenario.name + "-api-check"
        check.fleet.users = 1
        check.fleet.devicesPerUser = .fixed(2)
        check.fleet.arrival = nil
        check.fleet.reregisterEvery = nil
        check.leakProbeShare = 0
        check.faults = []
        let kinds = Scenario.Traffic.Kind.allCases.filter { kind in scenario.traffic.contains { $0.kind == kind } }
        check.traffic = kinds.map { kind in
            var traffic = Scenario.Traffic(name: "check-\(kind.rawValue)", kind: kind, to: .selfUser, profile: .constant(Rate(perSecond: 1), for: .seconds(1)))
            traffic.from = .user(scenario.fleet.names.user(0))
            traffic.platforms = scenario.traffic.first { $0.kind == kind }?.platforms ?? Scenario.PlatformName.allCases
            return traffic
        }
        check.deadline = max(scenario.deadline, .seconds(2))
        // After the sends (1 s) have had twice their deadline to be answered: a departure inside
        // a send's window leaves its pairs indeterminate, which a loaded machine made happen
        // (a send answered in 2.1 s, with one deadline of slack).
        check.fleet.departure = scenario.api?.unregister == nil ? nil : .init(share: 1, at: .seconds(1) + check.deadline * 2)
        check.grace = .seconds(1)
        check.thresholds = []
        check.thresholdMetrics = []
        return check
    }

    /// Requests and how they went, by operation.
    final class Tally: Sendable {
        private let counts = Mutex<[String: (passed: Int, failed: Int)]>([:])

        func add(_ trace: RequestTrace) {
            counts.withLock { counts in
                var entry = counts[trace.operation] ?? (0, 0)
                if trace.verdict == "unexpected" { entry.failed += 1 } else { entry.passed += 1 }
                counts[trace.operation] = entry
            }
        }

        var all: [String: (passed: Int, failed: Int)] { counts.withLock { $0 } }
    }

    static func describe(_ trace: RequestTrace) -> String {
        var out = "→ \(trace.operation): \(trace.method) \(trace.target)\n"
        for header in trace.headers { out += "    \(header)\n" }
        if let body = trace.body { out += "    \(body.prefix(400))\n" }
        if let status = trace.status {
            out += "← \(status) in \(String(format: "%.1f", trace.milliseconds)) ms: \(trace.verdict)\n"
            if !trace.answer.isEmpty { out += "    \(trace.answer)\n" }
        } else {
            out += "← no answer (\(trace.error ?? "?")) after \(String(format: "%.1f", trace.milliseconds)) ms\n"
        }
        return out
    }

    static func summary(_ tally: Tally, _ result: RunResult) -> (String, Bool) {
        var out = "\n== steps\n"
        var passed = true
        for (operation, counts) in tally.all.sorted(by: { $0.key < $1.key }) {
            let ok = counts.failed == 0
            passed = passed && ok
            out += "\(ok ? "pass" : "FAIL")  \(operation): \(counts.passed) answered as expected or handled by a rule, \(counts.failed) not\n"
        }
        let d = result.delivery
        // A send that failed after its rules ran out leaves its pairs indeterminate: not a pass.
        // A late push still proves the description right; its latency is a run's to judge (a
        // loaded machine made a correct backend's push arrive just past the check's deadline).
        let exact = d.expected > 0 && d.delivered + d.late == d.expected && d.lost == 0 && d.misdelivered == 0 && d.unverified == 0 && d.leaks == 0
            && d.indeterminate == 0 && d.duplicates == 0 && d.stale == 0
        let sendsFailed = Int(result.counters["sends.failed"] ?? 0)
        passed = passed && exact && sendsFailed == 0 && result.devices.ready == result.devices.planned
        if sendsFailed > 0 { out += "FAIL  sends: \(sendsFailed) failed\n" }
        out += "\(result.devices.ready == result.devices.planned ? "pass" : "FAIL")  devices ready: \(result.devices.ready)/\(result.devices.planned)\n"
        out += "\(exact ? "pass" : "FAIL")  pushes: expected \(d.expected), delivered \(d.delivered), late \(d.late), lost \(d.lost), misdelivered \(d.misdelivered), unverified \(d.unverified), indeterminate \(d.indeterminate), duplicates \(d.duplicates), stale \(d.stale)\n"
        // Per platform: what reached its device, and where the rest went wrong.
        for (platform, counts) in result.deliveryByPlatform.sorted(by: { $0.key < $1.key }) where counts.expected > 0 {
            let ok = counts.delivered + counts.late == counts.expected
            let late = counts.late > 0 ? " (\(counts.late) of them late)" : ""
            out += "\(ok ? "pass" : "FAIL")  \(platform): \(counts.delivered + counts.late) of \(counts.expected) pushes delivered\(late)\n"
            for why in result.hops?.why ?? [] where why.platform == platform {
                let detail = [why.status.map(String.init), why.reason].compactMap { $0 }.joined(separator: " ")
                out += "      \(why.outcome) \(why.count) at the \(why.hop.replacingOccurrences(of: "_", with: " ")): \(why.phrase)"
                    + (detail.isEmpty ? "" : " (\(detail))") + (why.advice.map { ": \($0)" } ?? "") + "\n"
            }
        }
        if let hops = result.hops, hops.view == "unknown", d.lost + d.late > 0 { out += "      where they went is unknown: \(hops.note ?? "")\n" }
        for error in result.errors { out += "      error \(error.errorClass): \(error.count)\n" }
        out += passed ? "api check passed\n" : "api check FAILED\n"
        return (out, passed)
    }
}
