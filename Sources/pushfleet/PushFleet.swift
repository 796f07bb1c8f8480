import ArgumentParser
import Foundation
import PushFleetBench
import PushFleetLauncher
import PushFleetResults

/// The exit codes pushfleet documents.
enum ExitStatus {
    static let passed: Int32 = 0
    static let failure: Int32 = 1
    static let invalidInput: Int32 = 2
    /// The generator was the limit: the run says nothing either way about the target.
    static let inconclusive: Int32 = 3
    static let thresholdFailed: Int32 = 99

    /// A run's exit code: a rule that stopped it failed (99); stopped otherwise (1); pushfleet
    /// the limit (3); a rule failed (99); else 0.
    static func of(_ result: RunResult) -> Int32 {
        if result.info.abortedBy != nil { return thresholdFailed }
        if result.info.aborted { return failure }
        if result.inconclusive { return inconclusive }
        return result.passed ? passed : thresholdFailed
    }
}

struct PushFleet: AsyncParsableCommand {
    static let version = PushFleetVersion.current

    static let configuration = CommandConfiguration(
        commandName: "pushfleet",
        abstract: "A simulated device fleet and load tester for push-notification backends.",
        version: version,
        subcommands: [Run.self, Capacity.self, Merge.self, Shards.self, Validate.self, APICommand.self, Report.self, Compare.self, Serve.self, Bench.self, HashPassword.self]
    )
}

struct HashPassword: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "hash-password",
        abstract: "Print a users-file line (user:sha256:SALT:HEX) for the reference backend's --users-file."
    )

    @Argument(help: "The user name.") var user: String
    @Argument(help: "The password.") var password: String

    func validate() throws {
        guard !user.isEmpty, !user.contains(":") else { throw ValidationError("the user name must be non-empty and contain no ':'") }
    }

    func run() {
        print(UserDirectoryLine.make(user: user, password: password))
    }
}

/// Parses and runs the command line and maps the outcome to a documented exit code.
///
/// Lives outside top-level code, where `run()` on an `AsyncParsableCommand` existential resolves to
/// the synchronous requirement.
enum CommandRunner {
    static func run(_ arguments: [String]? = nil) async -> Int32 {
        do {
            var command = try await PushFleet.asyncParseAsRoot(arguments)
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
            return ExitStatus.passed
        } catch {
            let code = PushFleet.exitCode(for: error)
            let message = PushFleet.fullMessage(for: error)
            if !message.isEmpty {
                if code == .success {
                    FileHandleOutput.standardOutput(message)
                } else {
                    FileHandleOutput.standardError(message)
                }
            }
            // Documented exit codes: 2 for invalid input (ArgumentParser's own is 64).
            return code == .validationFailure ? ExitStatus.invalidInput : code.rawValue
        }
    }
}
