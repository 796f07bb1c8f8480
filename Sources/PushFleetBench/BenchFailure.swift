import PushFleetResults

/// A benchmark whose own run went wrong (as opposed to a target not met): exit 1.
struct BenchFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }

    /// The bench's run was not right: what was wrong, then the run's errors by class, so the
    /// failure says why without the run's reports.
    init(run name: String, _ what: String, _ result: RunResult) {
        self.init("the \(name) run itself was not right: \(what)" + (result.errorsLine().map { "; errors: \($0)" } ?? ""))
    }
}
