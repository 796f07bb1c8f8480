public import Logging
public import PushFleetBackend
import PushFleetCore
import PushFleetHub
public import PushFleetMockPush
public import ServiceLifecycle
public import PushFleetServerSupport
import Foundation
import Synchronization
import Crypto
import PushFleetWebPush

/// The system under test that ships with pushfleet: the reference backend sending to the mock
/// push service, both in this process on loopback ports.
public struct EmbeddedSystem: Sendable {
    public struct Configuration: Sendable {
        public var backend: BackendConfiguration
        public var pushService: PushService.Configuration
        public var pushServer: MockPushServer.Configuration
        /// Send to this push service instead of starting the embedded one.
        public var externalPushServiceURL: String?
        /// The backend sends through the notification hub the embedded push service serves
        /// (`pushServer.hub`, made with the backend's registration TTL when not given), as the
        /// seeds' backend sends through its hub.
        public var throughHub = false
        /// The backend sends to the push service's TLS listener (HTTP/2), trusting its CA.
        public var backendUsesTLS: Bool
        /// The push service's wall clock (ns since the epoch): tests drive expiry with a manual one.
        public var pushServiceClock: @Sendable () -> Int64 = WallClock.nanoseconds

        public init(
            backend: BackendConfiguration = .init(),
            pushService: PushService.Configuration = .init(),
            pushServer: MockPushServer.Configuration = .init(),
            externalPushServiceURL: String? = nil,
            backendUsesTLS: Bool = false
        ) {
            self.backend = backend
            self.pushService = pushService
            self.pushServer = pushServer
            self.externalPushServiceURL = externalPushServiceURL
            self.backendUsesTLS = backendUsesTLS
        }
    }

    /// Where the running servers listen.
    public struct Endpoints: Sendable, Equatable {
        /// The backend's base URL.
        public var backend: String
        /// The push service's base URL (provider endpoints, admin, device gateway).
        public var pushService: String
        /// The push service's HTTP/2 cleartext base URL, when one was asked for.
        public var pushServiceHTTP2: String?
        /// The push service's TLS base URL (`https://`), when one was asked for.
        public var pushServiceTLS: String?
    }

    public let configuration: Configuration
    /// The backend, which ``restartBackend(downFor:)`` replaces by a new process-like instance.
    public let backend: RestartableBackend
    /// Nil when an external push service is used.
    public let pushServer: MockPushServer?

    public init(configuration: Configuration) {
        var configuration = configuration
        // The device gateway holds a socket per device: half of the descriptors; the backend
        // and the h2c and TLS ports share the rest.
        let embeddedPush = configuration.externalPushServiceURL == nil
        let h2 = embeddedPush && (configuration.pushServer.http2Listen != nil || configuration.pushServer.tls != nil)
        configuration.backend.server = configuration.backend.server.resolved(share: embeddedPush ? (h2 ? 0.25 : 0.5) : 1)
        configuration.pushServer.limits = configuration.pushServer.limits.resolved(share: Self.pushShare)
        // With both the h2c and the TLS port on, they split their quarter.
        let both = configuration.pushServer.http2Listen != nil && configuration.pushServer.tls != nil
        let h2Share = both ? 0.125 : 0.25
        configuration.pushServer.http2Limits = configuration.pushServer.http2Limits.resolved(share: h2Share)
        // One VAPID key for every restart too: browsers stay subscribed with its public half.
        let vapidKey = configuration.backend.vapidKey ?? P256.Signing.PrivateKey()
        configuration.backend.vapidKey = vapidKey
        if configuration.throughHub, embeddedPush {
            var hub = configuration.pushServer.hub ?? NotificationHub.Settings(registrationTTL: configuration.backend.registrationTTL)
            // The hub signs browser pushes with the key the backend's pages subscribe with.
            hub.browserCredential = VAPIDSigner(key: vapidKey, subject: hub.browserCredential.subject)
            configuration.pushServer.hub = hub
            configuration.backend.hub = hub.connectionString()
            configuration.backend.hubAtPushService = true
        }
        if let limits = configuration.pushServer.tls?.limits { configuration.pushServer.tls?.limits = limits.resolved(share: h2Share) }
        let tlsBackend = embeddedPush && configuration.backendUsesTLS && configuration.pushServer.tls != nil
        if tlsBackend, let authority = configuration.pushServer.tls?.identity.authorityPEM {
            configuration.backend.pushServiceTrustRootsPEM = authority
        }
        // One signing key for every restart, as a deployment configures one: tokens issued before
        // a restart stay valid after it.
        if configuration.backend.tokenSecret == nil {
            configuration.backend.tokenSecret = Data((0..<32).map { _ in UInt8.random(in: 0...255) })
        }
        self.configuration = configuration
        let pushServer: MockPushServer? =
            configuration.externalPushServiceURL == nil
            ? MockPushServer(service: PushService(configuration: configuration.pushService, now: configuration.pushServiceClock), configuration: configuration.pushServer)
            : nil
        self.pushServer = pushServer
        let external = configuration.externalPushServiceURL
        self.backend = RestartableBackend(configuration: configuration.backend) {
            if let external { return external }
            if tlsBackend { return "https://\(try await pushServer!.boundTLS.value().authority)" }
            return try await pushServer!.bound.value().httpURL
        }
    }

    /// The services to run together, push service first.
    public func makeServices(logger: Logger) -> [any Service] {
        (pushServer?.makeServices(logger: logger) ?? []) + [backend.makeService(logger: logger)]
    }

    /// Stops the backend as a process stops (its connections closed, its memory gone), keeps it
    /// down for `downFor`, and starts a new one on the same port with the same configuration and
    /// store; returns once it listens again.
    public func restartBackend(downFor: Duration = .zero) async throws {
        try await backend.restart(downFor: downFor)
    }

    /// Waits until every server listens.
    public func endpoints() async throws -> Endpoints {
        let backendURL = try await backend.bound.value().httpURL
        guard let pushServer else {
            return Endpoints(backend: backendURL, pushService: configuration.externalPushServiceURL ?? "")
        }
        let http2 = configuration.pushServer.http2Listen == nil ? nil : try await pushServer.boundHTTP2.value().httpURL
        let tls = configuration.pushServer.tls == nil ? nil : "https://\(try await pushServer.boundTLS.value().authority)"
        return Endpoints(
            backend: backendURL, pushService: try await pushServer.bound.value().httpURL, pushServiceHTTP2: http2, pushServiceTLS: tls
        )
    }

    /// Runs the system for the duration of `body`, then shuts it down gracefully, waiting up to
    /// `shutdownWithin` before the servers still closing are cancelled.
    public static func withRunning<T: Sendable>(
        _ configuration: Configuration = .init(),
        logger: Logger = Logger(label: "pushfleet.embedded"),
        shutdownWithin: Duration = .seconds(5),
        _ body: @escaping @Sendable (EmbeddedSystem, Endpoints) async throws -> T
    ) async throws -> T {
        let system = EmbeddedSystem(configuration: configuration)
        return try await withServices(system.makeServices(logger: logger), logger: logger, shutdownWithin: shutdownWithin) {
            try await body(system, try await system.endpoints())
        }
    }

    /// A TLS listener for the push service with a CA and certificate made now for `names`; the
    /// CA's PEM is written to `caFile` when given, for clients outside this process.
    public static func tlsListener(listen: String, names: [String], caFile: String?) throws -> MockPushServer.TLS {
        let identity = try TLSIdentity.generate(names: names)
        if let caFile { try identity.writeAuthority(to: caFile) }
        return MockPushServer.TLS(listen: try ListenAddress(parsing: listen), identity: identity)
    }

    public typealias ServerStoppedError = PushFleetServerSupport.ServerStoppedError
}

/// The reference backend as a restartable process: one service that runs a backend until a
/// restart is asked for, then a new one on the same port.
public final class RestartableBackend: Sendable {
    public let configuration: BackendConfiguration
    let pushServiceURL: @Sendable () async throws -> String
    /// The first bound address; later backends listen on the same port.
    public let bound = Readiness<ListenAddress>()
    private let state = Mutex(State())
    private let currentBackend: Mutex<ReferenceBackend?> = Mutex(nil)

    private struct State {
        var queued: [Request] = []
        var waiter: CheckedContinuation<Request?, Never>?
    }

    struct Request: Sendable {
        var downFor: Duration
        var done: Readiness<Void>
    }

    init(configuration: BackendConfiguration, pushServiceURL: @escaping @Sendable () async throws -> String) {
        self.configuration = configuration
        self.pushServiceURL = pushServiceURL
    }

    /// The backend running now (nil while it is down).
    public var current: ReferenceBackend? { currentBackend.withLock { $0 } }

    func restart(downFor: Duration) async throws {
        let done = Readiness<Void>()
        let request = Request(downFor: downFor, done: done)
        let waiter = state.withLock { state in
            if let waiter = state.waiter {
                state.waiter = nil
                return Optional(waiter)
            }
            state.queued.append(request)
            return nil
        }
        waiter?.resume(returning: request)
        // An old backend that never finishes stopping must not hold the run forever.
        let limit = downFor + Runner.rebindWindow + .seconds(30)
        let timer = Task {
            try await Task.sleep(for: limit)
            done.fail(RestartTimedOut(limit: limit))
        }
        defer { timer.cancel() }
        // The caller may stop waiting; the restart goes on.
        try await withTaskCancellationHandler {
            try await done.value()
        } onCancel: {
            done.fail(CancellationError())
        }
    }

    public struct RestartTimedOut: Error, CustomStringConvertible {
        public var limit: Duration
        public var description: String { "the backend did not listen again within \(limit)" }
    }

    /// The next restart request; nil once the task is cancelled.
    private func nextRequest() async -> Request? {
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let ready = state.withLock { state -> Request?? in
                    if !state.queued.isEmpty { return .some(state.queued.removeFirst()) }
                    if Task.isCancelled { return .some(nil) }
                    state.waiter = continuation
                    return nil
                }
                if let ready { continuation.resume(returning: ready) }
            }
        } onCancel: {
            let waiter = state.withLock { state in
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume(returning: nil)
        }
    }

    func makeService(logger: Logger) -> any Service {
        Runner(owner: self, logger: logger)
    }

    struct Runner: Service {
        let owner: RestartableBackend
        let logger: Logger

        /// How long a restarted backend keeps trying to bind its port: while it was down, another
        /// socket of this machine (a client's ephemeral port) may have taken it for a moment.
        static let rebindWindow: Duration = .seconds(10)

        enum Ended {
            case stopped
            case restart(Request)
            case notBound(any Error)
        }

        func run() async throws {
            var configuration = owner.configuration
            var pending: Readiness<Void>?
            // Whoever asked for a restart always gets an answer, whichever way this ends.
            defer { pending?.fail(EmbeddedSystem.ServerStoppedError()) }
            var everListened = false
            var rebindUntil = ContinuousClock.now
            while !Task.isCancelled && !Task.isShuttingDownGracefully {
                let ended = try await runOnce(configuration) { address in
                    everListened = true
                    owner.bound.succeed(address)
                    pending?.succeed(())
                    pending = nil
                }
                switch ended {
                case .stopped:
                    return
                case .restart(let request):
                    configuration.listen.port = try await owner.bound.value().port
                    pending = request.done
                    rebindUntil = .now + request.downFor + Self.rebindWindow
                    guard await Self.stayDown(request.downFor) else { return }
                case .notBound(let error):
                    guard everListened else {
                        owner.bound.fail(error)
                        throw error
                    }
                    if ContinuousClock.now < rebindUntil {
                        try await Task.sleep(for: .milliseconds(100))
                        continue
                    }
                    // Down for good unless asked to start again, as a crashed process stays down.
                    pending?.fail(RestartFailed(underlying: error))
                    pending = nil
                    guard let next = await cancelWhenGracefulShutdown({ await owner.nextRequest() }) else { return }
                    pending = next.done
                    rebindUntil = .now + next.downFor + Self.rebindWindow
                    guard await Self.stayDown(next.downFor) else { return }
                }
            }
        }

        /// Waits out a restart's down time; false when the system is stopping meanwhile.
        private static func stayDown(_ time: Duration) async -> Bool {
            if time > .zero { try? await cancelWhenGracefulShutdown { try await Task.sleep(for: time) } }
            return !Task.isCancelled && !Task.isShuttingDownGracefully
        }

        /// Runs one backend until it stops, a restart is asked for, or it cannot bind.
        private func runOnce(_ configuration: BackendConfiguration, listening: (ListenAddress) -> Void) async throws -> Ended {
            let backend = ReferenceBackend(configuration: configuration, pushServiceURL: owner.pushServiceURL)
            // The backend runs in a group of its own, so that a restart is a graceful shutdown of
            // it alone, as a process receiving SIGTERM stops.
            let backendGroup = ServiceGroup(
                configuration: .init(services: [.init(service: backend.makeService(logger: logger))], gracefulShutdownSignals: [], logger: logger)
            )
            return try await withThrowingTaskGroup(of: Request?.self) { group in
                group.addTask {
                    do {
                        try await backendGroup.run()
                    } catch {
                        backend.bound.fail(error)
                        throw error
                    }
                    backend.bound.fail(EmbeddedSystem.ServerStoppedError())
                    return nil
                }
                let address: ListenAddress
                do {
                    address = try await backend.bound.value()
                } catch {
                    group.cancelAll()
                    while case .some = try? await group.next() {}
                    return .notBound(error)
                }
                owner.currentBackend.withLock { $0 = backend }
                defer { owner.currentBackend.withLock { $0 = nil } }
                listening(address)
                group.addTask { await owner.nextRequest() }
                let first = try await withGracefulShutdownHandler {
                    try await group.next() ?? nil
                } onGracefulShutdown: {
                    Task { await backendGroup.triggerGracefulShutdown() }
                }
                if first != nil {
                    // Asked to restart: stop the backend and wait for it.
                    await backendGroup.triggerGracefulShutdown()
                    _ = try await group.next()
                }
                group.cancelAll()
                return first.map { .restart($0) } ?? .stopped
            }
        }
    }

    public struct RestartFailed: Error, CustomStringConvertible {
        public var underlying: any Error
        public var description: String { "the backend could not listen again: \(underlying)" }
    }
}
