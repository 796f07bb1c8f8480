import Foundation
package import NIOCore
import NIOHTTP1
import NIOPosix
import NIOWebSocket
import PushFleetCore
import PushFleetWire

package enum GatewaySocketError: Error, Sendable, Equatable {
    case refused(UInt)
    /// The push service holds all the device sockets it takes: a 503 whose JSON body is
    /// `{"reason":"AtCapacity","cap":N}`.
    case atCapacity(cap: Int)
    case closed
    case timeout
}

/// A device's own WebSocket to the push gateway, driven by NIO callbacks.
///
/// No task is parked per connection: the socket lives in its channel's pipeline, frames arrive
/// in the read callback and go straight to `onInbound`. That, NIO's WebSocket codec and a
/// small receive buffer are what keep 15,000 sockets within a few KB each.
package final class GatewaySocket: Sendable {
    package let channel: any Channel

    private init(channel: any Channel) { self.channel = channel }

    /// Connects, upgrades to WebSocket and waits for the gateway's `subscribed` notice; pushes
    /// held for the device arrive through `onInbound` before it.
    package static func open(
        host: String,
        port: Int,
        uri: String,
        group: any EventLoopGroup,
        source: SocketAddress?,
        timeout: Duration,
        keepalive: GatewayKeepalive? = nil,
        onInbound: @escaping @Sendable (GatewayInbound, Int64) -> Void
    ) async throws -> GatewaySocket {
        let loop = group.next()
        let ready = loop.makePromise(of: Void.self)
        let hostHeader = "\(host):\(port)"
        var bootstrap = ClientBootstrap(group: loop)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            // NIO keeps a channel's last receive buffer for the next read, so its size is paid
            // by every idle device; a push frame larger than 256 bytes takes a few reads.
            .channelOption(.recvAllocator, value: FixedSizeRecvByteBufferAllocator(capacity: 256))
            .connectTimeout(.nanoseconds(timeout.nanoseconds))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let upgrader = GatewayUpgrader(frames: GatewayFrames(ready: ready, keepalive: keepalive, onInbound: onInbound))
                    // Frames sent right behind the 101 answer arrive in the same read; keep them.
                    try channel.pipeline.syncOperations.addHTTPClientHandlers(
                        leftOverBytesStrategy: .forwardBytes,
                        withClientUpgrade: (upgraders: [upgrader], completionHandler: { _ in })
                    )
                    var head = HTTPRequestHead(version: .http1_1, method: .GET, uri: uri)
                    head.headers.add(name: "Host", value: hostHeader)
                    try channel.pipeline.syncOperations.addHandler(UpgradeRequest(head: head, ready: ready))
                }
            }
        if let source { bootstrap = bootstrap.bind(to: source) }
        let channel: any Channel
        do {
            channel = try await bootstrap.connect(host: host, port: port).get()
        } catch {
            ready.fail(error)
            throw error
        }
        let timer = loop.scheduleTask(in: .nanoseconds(timeout.nanoseconds)) {
            ready.fail(GatewaySocketError.timeout)
            channel.close(promise: nil)
        }
        // A close before the gateway's confirmation fails `ready` in the handlers' channelInactive:
        // a callback on closeFuture would stay with every device's socket for its whole life.
        defer { timer.cancel() }
        try await ready.futureResult.get()
        return GatewaySocket(channel: channel)
    }

    /// Says goodbye with a close frame, then closes.
    package func close() {
        let channel = self.channel
        channel.eventLoop.execute {
            guard channel.isActive else { return }
            var reason = channel.allocator.buffer(capacity: 2)
            reason.write(webSocketErrorCode: .normalClosure)
            let frame = WebSocketFrameReader.controlFrame(.connectionClose, payload: reason, allocator: channel.allocator)
            channel.writeAndFlush(frame).whenComplete { _ in channel.close(promise: nil) }
        }
    }
}
