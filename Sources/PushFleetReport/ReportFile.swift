public import Foundation

/// One report file, produced as a sequence of pieces. A writer hands each piece to the disk as
/// it comes, so the whole file is never in memory at once (docs/reports.md, "Writing the
/// reports").
public struct ReportFile: Sendable {
    public let name: String
    private let produce: @Sendable (_ emit: (Data) throws -> Void) throws -> Void

    public init(name: String, produce: @escaping @Sendable (_ emit: (Data) throws -> Void) throws -> Void) {
        self.name = name
        self.produce = produce
    }

    /// Hands the file's pieces to `emit`, in order.
    public func write(_ emit: (Data) throws -> Void) throws {
        try produce(emit)
    }

    /// The whole file.
    public func data() throws -> Data {
        var data = Data()
        try produce { data.append($0) }
        return data
    }
}
