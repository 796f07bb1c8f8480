import Foundation
import Testing

/// `bench delivery`'s flags come from outside: each out-of-range or unknown value is refused
/// (exit 2, named) before any server starts.
@Suite("bench delivery flags")
struct BenchDeliveryCLITests {
    @Test("out-of-range or unknown flags exit 2 with the flag named", arguments: [
        (["--devices", "0"], "--devices"), (["--devices", "2000000"], "--devices"), (["--channel", "shared"], "--channel"),
        (["--rate", "0"], "--rate"), (["--in-flight", "0"], "--in-flight"), (["--tracing", "maybe"], "--tracing"),
        (["--servers", "apart"], "--servers"), (["--servers", ""], "--servers"), (["--duration", "soon"], "duration"),
    ])
    func refusals(_ flags: [String], _ named: String) async throws {
        let outcome = try await CLITests.run(["bench", "delivery"] + flags, in: FileManager.default.temporaryDirectory)
        #expect(outcome.status == 2, "\(flags): \(outcome.output)")
        #expect(outcome.output.contains(named), "\(flags): \(outcome.output)")
    }
}
