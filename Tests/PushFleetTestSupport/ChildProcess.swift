package import Foundation

/// A command-line tool run to its end off Swift's pool, with bytes on stdin; its exit status and
/// everything it wrote (stdout and stderr together).
package enum ChildProcess {
    package struct Outcome {
        package var status: Int32
        package var output: Data
        package var text: String { String(decoding: output, as: UTF8.self) }
    }

    /// - Parameters:
    ///   - holdInput: keep stdin open this long after writing, so the tool reads answers.
    ///   - limit: the tool is stopped (SIGTERM) if still running this long after it started
    ///     (whole seconds).
    package static func run(
        _ tool: String, _ arguments: [String], input: Data = Data(), holdInput: Duration = .zero, limit: Duration = .seconds(15)
    ) async throws -> Outcome {
        try await offPool {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            // coreutils' timeout bounds the tool's life, whatever it waits for; SIGKILL, since a child
            // of this process may inherit SIGTERM blocked.
            let seconds = max(1, limit.components.seconds)
            process.arguments = ["timeout", "-s", "KILL", "\(seconds)", tool] + arguments
            let stdin = Pipe()
            let output = Pipe()
            process.standardInput = stdin
            process.standardOutput = output
            process.standardError = output
            try process.run()
            stdin.fileHandleForWriting.write(input)
            if holdInput > .zero { Thread.sleep(forTimeInterval: Double(holdInput.components.seconds) + Double(holdInput.components.attoseconds) * 1e-18) }
            try? stdin.fileHandleForWriting.close()
            let data = output.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            return Outcome(status: process.terminationStatus, output: data)
        }
    }
}
