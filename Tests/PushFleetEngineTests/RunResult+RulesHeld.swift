import PushFleetResults

extension RunResult {
    /// Every rule of the run held. What a test that does not judge the generator asserts: on a
    /// machine loaded by the rest of the suite the fleet's and the push service's event loops
    /// wake late, and the run rightly calls pushfleet the limit (inconclusive, not passed).
    var rulesHeld: Bool { thresholds.allSatisfy(\.passed) }
}
