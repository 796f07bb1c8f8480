public import HummingbirdCore
public import NIOCore
import Synchronization

/// What a request's handler may know about the connection it arrived on: whether it is TLS, the
/// client certificate, and per-connection state a protocol keeps (APNs binds a provider token to
/// its connection). Handlers read it as ``current``; the router's context type stays the same.
public final class ConnectionState: Sendable {
    /// The connection of the request being handled; nil outside a tracked server.
    @TaskLocal public static var current: ConnectionState?

    public let isTLS: Bool
    private let peer = Mutex<[UInt8]?>(nil)
    /// Each value in a box of its own type, keyed by that type: found without a dynamic cast
    /// and changed in place, where an existential was cast, copied and boxed again per request.
    private let attachments = Mutex<[ObjectIdentifier: AnyObject]>([:])

    public init(isTLS: Bool) {
        self.isTLS = isTLS
    }

    /// The client certificate's DER, once the TLS handshake verified it; nil without one.
    public var peerCertificateDER: [UInt8]? { peer.withLock { $0 } }

    func setPeerCertificate(_ der: [UInt8]?) {
        peer.withLock { $0 = der }
    }

    /// Runs `body` on this connection's value of type `T` (made by `initial` the first time),
    /// under the connection's lock: requests of one HTTP/2 connection run concurrently.
    public func withAttachment<T: Sendable, R>(_ initial: @autoclosure () -> T, _ body: (inout T) -> R) -> R {
        attachments.withLock { values in
            let key = ObjectIdentifier(T.self)
            let box: AttachmentBox<T>
            if let found = values[key] {
                // Only an `AttachmentBox<T>` is ever stored under `T`'s identifier.
                box = unsafeDowncast(found, to: AttachmentBox<T>.self)
            } else {
                box = AttachmentBox(initial())
                values[key] = box
            }
            return body(&box.value)
        }
    }
}

/// A connection's attachment of type `T`, touched only under the connection's lock.
private final class AttachmentBox<T: Sendable>: @unchecked Sendable {
    var value: T

    init(_ value: T) {
        self.value = value
    }
}

/// The connections of one server, by their channel, so a responder can find a request's
/// connection: the request's own channel (HTTP/1.1) or its parent (an HTTP/2 stream).
public final class ConnectionRegistry: Sendable {
    private let states = Mutex<[ObjectIdentifier: ConnectionState]>([:])

    public init() {}

    /// Tracks `channel` until it closes.
    func register(_ channel: any Channel, isTLS: Bool) -> ConnectionState {
        let state = ConnectionState(isTLS: isTLS)
        let key = ObjectIdentifier(channel)
        states.withLock { $0[key] = state }
        channel.closeFuture.whenComplete { [weak self] _ in
            _ = self?.states.withLock { $0.removeValue(forKey: key) }
        }
        return state
    }

    package func state(for channel: any Channel) -> ConnectionState? {
        states.withLock { states in
            states[ObjectIdentifier(channel)] ?? channel.parent.flatMap { states[ObjectIdentifier($0)] }
        }
    }

    public var count: Int { states.withLock { $0.count } }

    /// `responder` with ``ConnectionState/current`` set for each request.
    public func tracking(_ responder: @escaping HTTPChannelHandler.Responder) -> HTTPChannelHandler.Responder {
        { request, writer, channel in
            guard let state = self.state(for: channel) else {
                return try await responder(request, writer, channel)
            }
            var pending = Optional(writer)
            try await ConnectionState.$current.withValue(state) {
                guard let writer = pending.take() else { return }
                try await responder(request, writer, channel)
            }
        }
    }
}
