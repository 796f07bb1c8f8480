package import Logging
package import ServiceLifecycle

/// The servers stopped (a port could not be bound, a server failed) before the work they were
/// started for was done.
public struct ServerStoppedError: Error, CustomStringConvertible {
    public init() {}
    public var description: String { "the servers stopped before the work was done" }
}

/// Runs `services` in one service group beside `body`, then stops them cleanly.
///
/// `body` waits for whatever it needs of them (a bound address) itself. Either ends the other:
/// if the services stop first, `body` is cancelled and this throws their error, or
/// ``ServerStoppedError`` when they stopped without one; once `body` returns, the services shut
/// down gracefully, waited for up to `shutdownWithin` (a server still closing is then cancelled).
package func withServices<T: Sendable>(
    _ services: [any Service],
    logger: Logger,
    shutdownWithin: Duration = .seconds(5),
    _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    let group = ServiceGroup(configuration: .init(services: services.map { .init(service: $0) }, logger: logger))
    return try await withThrowingTaskGroup(of: T?.self) { tasks in
        tasks.addTask {
            try await group.run()
            return nil
        }
        tasks.addTask { try await body() }
        defer { tasks.cancelAll() }
        guard let value = try await tasks.next() ?? nil else { throw ServerStoppedError() }
        await group.triggerGracefulShutdown()
        tasks.addTask {
            try await Task.sleep(for: shutdownWithin)
            return nil
        }
        _ = try? await tasks.next()
        return value
    }
}
