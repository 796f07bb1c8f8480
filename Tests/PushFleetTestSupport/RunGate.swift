/// Whole fleet runs take both cores of a test machine: two at once turn each other's pushes late
/// and their exact counts into noise. Tests that run a fleet take turns through this gate; the
/// rest of the suite still runs alongside them.
package actor RunGate {
    package static let shared = RunGate()

    private var busy = false
    private var waiting: [CheckedContinuation<Void, Never>] = []

    private func enter() async {
        guard busy else {
            busy = true
            return
        }
        await withCheckedContinuation { waiting.append($0) }
    }

    private func leave() {
        if waiting.isEmpty { busy = false } else { waiting.removeFirst().resume() }
    }

    /// Runs `body` when no other gated run is under way.
    package static func exclusive<T: Sendable>(_ body: () async throws -> T) async throws -> T {
        await shared.enter()
        do {
            let result = try await body()
            await shared.leave()
            return result
        } catch {
            await shared.leave()
            throw error
        }
    }
}
