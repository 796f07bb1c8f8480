/// A benchmark whose own run went wrong (as opposed to a target not met): exit 1.
struct BenchFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
