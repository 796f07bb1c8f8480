import Foundation
import Testing

/// `bench soak`'s flags come from outside: each out-of-range value is refused (exit 2, named)
/// before any server starts.
@Suite("bench soak flags")
struct BenchSoakCLITests {
    @Test("out-of-range or malformed flags exit 2 with the flag named", arguments: [
        (["--devices", "0"], "--devices"), (["--devices", "2000000"], "--devices"), (["--rate", "0"], "--rate"),
        (["--rate", "-5"], "--rate"), (["--warmup", "0.95"], "--warmup"), (["--warmup", "nan"], "--warmup"),
        (["--duration", "5s"], "--duration"), (["--duration", "2d"], "--duration"), (["--duration", "soon"], "duration"),
        (["--horizon", "5s"], "--horizon"), (["--horizon", "30d"], "--horizon"), (["--horizon", "later"], "horizon"),
    ])
    func refusals(_ flags: [String], _ named: String) async throws {
        let outcome = try await CLITests.run(["bench", "soak"] + flags, in: FileManager.default.temporaryDirectory)
        #expect(outcome.status == 2, "\(flags): \(outcome.output)")
        #expect(outcome.output.contains(named), "\(flags): \(outcome.output)")
    }
}
