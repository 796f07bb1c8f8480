import Foundation
import PushFleetEngine

/// wrk (Debian's package) on one thread: the C reference for `bench http`.
enum Wrk {
    /// Requests wrk got answered on `connections` connections for `seconds`, and the CPU it spent.
    static func measure(_ wrk: String, url: String, connections: Int, seconds: Double) async throws -> HTTPMeasurement {
        let before = CPUTime.children()
        let started = Date()
        let output = try await ReferenceTool.run(wrk, ["-t1", "-c\(connections)", "-d\(Int(seconds))s", url]).output
        let cpu = CPUTime.children() - before
        let requests = output.split(separator: "\n").first { $0.contains("requests in") }
            .flatMap { Double($0.trimmingCharacters(in: .whitespaces).split(separator: " ").first ?? "") } ?? 0
        return HTTPMeasurement(tool: "wrk -t1 (C)", requests: requests, cpu: cpu, wall: Date().timeIntervalSince(started))
    }
}
