public import HummingbirdCore
public import Logging
public import NIOCore
public import NIOSSL
import NIOTLS

/// A TLS connection that speaks HTTP/2 or HTTP/1.1 on one port: ALPN offers both, and the first
/// decrypted bytes decide (``HTTPVersionSniff``), so HTTP/2 clients that offer no ALPN work too.
/// HTTP/1.1 goes to any HTTP/1.1 child channel (one that upgrades WebSockets, say).
///
/// Wrapped in ``GuardedChildChannel``, the TLS handler goes first, so the guard's header timeout
/// also bounds the handshake and its checks see plaintext; an HTTP/1.1 connection gets the guard's
/// ``HTTP1FastPath`` once the sniff has decided.
public struct TLSServerChannel<HTTP1: ServerChildChannel>: ServerChildChannel {
    public enum Negotiated: Sendable {
        case http1(HTTP1.Value)
        case http2(HTTP2RoutesChannel.Value)
    }

    public struct Value: ServerChildChannelValue {
        let negotiated: EventLoopFuture<Negotiated>
        public let channel: any Channel
    }

    let context: NIOSSLContext
    let acceptAnyClientCertificate: Bool
    let http1: HTTP1
    let http2: HTTP2RoutesChannel
    let connections: ConnectionRegistry?
    let limits: ServerLimits?

    /// - Parameters:
    ///   - configuration: the server's TLS configuration (see ``TLSIdentity/serverConfiguration(clientCertificates:)``).
    ///   - acceptAnyClientCertificate: accept a client certificate that chains to nothing known;
    ///     the handshake still proves the client holds its key.
    ///   - connections: where the client certificate is recorded for the connection's requests.
    ///   - limits: the PING rate HTTP/2 connections are held to.
    public init(
        configuration: TLSConfiguration,
        acceptAnyClientCertificate: Bool = false,
        http1: HTTP1,
        http2: HTTP2RoutesChannel,
        connections: ConnectionRegistry? = nil,
        limits: ServerLimits? = nil
    ) throws {
        var configuration = configuration
        configuration.applicationProtocols = ["h2", "http/1.1"]
        self.context = try NIOSSLContext(configuration: configuration)
        self.acceptAnyClientCertificate = acceptAnyClientCertificate
        self.http1 = http1
        self.http2 = http2
        self.connections = connections
        self.limits = limits
    }

    public func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        channel.eventLoop.makeCompletedFuture {
            let verification: NIOSSLCustomVerificationCallback? =
                acceptAnyClientCertificate ? { _, promise in promise.succeed(.certificateVerified) } : nil
            let tls = NIOSSLServerHandler(context: context, customVerificationCallback: verification, configuration: .init())
            try channel.pipeline.syncOperations.addHandler(tls, position: .first)
            let promise = channel.eventLoop.makePromise(of: Negotiated.self)
            let http1 = http1
            let http2 = http2
            let limits = limits
            let sniffer = HTTPVersionSniffHandler(
                result: promise,
                connection: connections?.state(for: channel)
            ) { channel, version in
                switch version {
                case .http2:
                    return http2.setup(channel: channel, logger: logger).flatMapThrowing { value in
                        if let limits { try HTTP2PingGuard.install(on: channel, limits: limits) }
                        return .http2(value)
                    }
                case .http1, .needMore:
                    return http1.setup(channel: channel, logger: logger).flatMapThrowing { value in
                        let pipeline = channel.pipeline.syncOperations
                        try pipeline.addHandler(ParseErrorCatcher())
                        // Right after the sniff, which hands its bytes to the next handler as it leaves.
                        try FirstRequestGuard.installFastPath(on: pipeline, after: pipeline.handler(type: HTTPVersionSniffHandler<Negotiated>.self))
                        return .http1(value)
                    }
                }
            }
            try channel.pipeline.syncOperations.addHandler(sniffer)
            return Value(negotiated: promise.futureResult, channel: channel)
        }
    }

    public func handle(value: Value, logger: Logger) async {
        do {
            switch try await value.negotiated.get() {
            case .http1(let connection): await http1.handle(value: connection, logger: logger)
            case .http2(let connection): await http2.handle(value: connection, logger: logger)
            }
        } catch {
            logger.debug("TLS connection ended before a request: \(error)")
        }
    }
}

extension TLSServerChannel: HTTPChannelHandler where HTTP1: HTTPChannelHandler {
    public var responder: HTTPChannelHandler.Responder { http1.responder }
}

/// After the TLS handler: holds the first bytes until ``HTTPVersionSniff`` decides, has the
/// pipeline configured for that version, then hands the held bytes on and leaves. Records the
/// client certificate when the handshake completes.
final class HTTPVersionSniffHandler<Output: Sendable>: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias Configure = (any Channel, HTTPVersionSniff) -> EventLoopFuture<Output>

    private enum State {
        case sniffing
        case configuring
        case done
    }

    private var state = State.sniffing
    /// Within ``removeHandler(context:removalToken:)``: what reaches this handler then (bytes an
    /// ``HTTP1FastPath`` handed back through the guard before it) goes on.
    private var leaving = false
    private var held: ByteBuffer?
    private var readPending = false
    private let result: EventLoopPromise<Output>
    private let connection: ConnectionState?
    private let configure: Configure

    init(result: EventLoopPromise<Output>, connection: ConnectionState?, configure: @escaping Configure) {
        self.result = result
        self.connection = connection
        self.configure = configure
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if leaving { return context.fireUserInboundEventTriggered(event) }
        // The server allows half-closure, so a client that leaves before its first request
        // (a failed verification, a probe) is an event, not an inactive channel: close it.
        if let event = event as? ChannelEvent, event == .inputClosed {
            finish(.failure(ChannelError.eof))
            context.close(promise: nil)
            return
        }
        if case TLSUserEvent.handshakeCompleted = event, let connection,
            let tls = try? context.pipeline.syncOperations.handler(type: NIOSSLServerHandler.self)
        {
            connection.setPeerCertificate(try? tls.peerCertificate?.toDERBytes())
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if leaving { return context.fireChannelRead(data) }
        var bytes = unwrapInboundIn(data)
        if var current = held {
            current.writeBuffer(&bytes)
            held = current
        } else {
            held = bytes
        }
        guard case .sniffing = state, let held else { return }
        let version = HTTPVersionSniff.classify(held.readableBytesView)
        guard version != .needMore else { return }
        state = .configuring
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        configure(context.channel, version).whenComplete { outcome in
            let (handler, context) = loopBound.value
            switch outcome {
            case .success(let value):
                handler.finish(.success(value))
                context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
            case .failure(let error):
                handler.finish(.failure(error))
                context.close(promise: nil)
            }
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        // Held until the pipeline is ready; replayed on removal.
        if case .done = state { context.fireChannelReadComplete() } else { readPending = true }
    }

    func removeHandler(context: ChannelHandlerContext, removalToken: ChannelHandlerContext.RemovalToken) {
        state = .done
        leaving = true
        if let held {
            self.held = nil
            context.fireChannelRead(wrapInboundOut(held))
            context.fireChannelReadComplete()
        } else if readPending {
            context.fireChannelReadComplete()
        }
        context.leavePipeline(removalToken: removalToken)
    }

    func channelInactive(context: ChannelHandlerContext) {
        finish(.failure(ChannelError.eof))
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A failed handshake, or bytes that are not TLS: nothing more will come.
        finish(.failure(error))
        context.fireErrorCaught(error)
        context.close(promise: nil)
    }

    /// Completes the result once, whatever comes first.
    private func finish(_ outcome: Result<Output, any Error>) {
        switch state {
        case .sniffing, .configuring:
            state = .done
            result.completeWith(outcome)
        case .done:
            break
        }
    }
}
