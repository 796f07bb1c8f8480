import Foundation
import PushFleetTestSupport
import Testing

/// The fuzz targets of a normal build replay the committed corpus: the findings stay fixed.
@Suite("Fuzz corpus")
struct FuzzCorpusTests {
    /// Every committed input, the findings among them, through the targets of a normal build
    /// (which replay files instead of fuzzing): each must still be handled without a finding.
    @Test("the fuzz corpus replays without a finding", arguments: [("FuzzParsers", "parsers"), ("FuzzScenario", "scenario"), ("FuzzServers", "servers"), ("FuzzWire", "wire")])
    func corpusReplays(target: String, corpus: String) async throws {
        let folder = CLITests.root.appendingPathComponent("Fuzz/corpus/\(corpus)")
        let inputs = try FileManager.default.contentsOfDirectory(atPath: folder.path).count
        #expect(inputs > 10)
        let outcome = try await CLITests.run([folder.path], in: CLITests.root, executable: CLITests.product(target))
        #expect(outcome.status == 0, "\(outcome.output.suffix(3000))")
        #expect(outcome.output.contains("replayed \(inputs) inputs"))
    }
}
