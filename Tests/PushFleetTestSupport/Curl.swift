import Foundation

/// Runs curl, the HTTP/2-cleartext client the tests use (AsyncHTTPClient speaks HTTP/2 over TLS only).
package enum Curl {
    package struct Failure: Error, CustomStringConvertible {
        package var description: String
    }

    package static func run(_ arguments: [String]) async throws -> String {
        try await offPool { try runBlocking(arguments) }
    }

    private static func runBlocking(_ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["curl"] + arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let text = String(decoding: data, as: UTF8.self)
        guard process.terminationStatus == 0 else { throw Failure(description: "curl exited \(process.terminationStatus): \(text)") }
        return text
    }
}
