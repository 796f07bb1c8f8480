/// Waits until `condition` holds, or `limit` has passed, polling every 20 ms; the caller checks
/// the condition again. The limit only bounds a hang: a starved machine may take seconds.
package func eventually(within limit: Duration, _ condition: () -> Bool) async throws {
    let end = ContinuousClock.now.advanced(by: limit)
    while !condition(), ContinuousClock.now < end { try await Task.sleep(for: .milliseconds(20)) }
}
