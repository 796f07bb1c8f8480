import Crypto
import Foundation
import NIOCore
import NIOHTTP1
import NIOWebSocket

/// Sends the upgrade request once connected; an HTTP answer reaching it means the upgrade was
/// refused. A 503 is read to its end: the push service names its device cap in the body.
final class UpgradeRequest: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundOut = HTTPClientRequestPart

    private let head: HTTPRequestHead
    private let ready: EventLoopPromise<Void>
    /// The body of a 503 so far (a few hundred bytes; more is not the service's refusal).
    private var refusal: ByteBuffer?

    init(head: HTTPRequestHead, ready: EventLoopPromise<Void>) {
        self.head = head
        self.ready = ready
    }

    func channelActive(context: ChannelHandlerContext) {
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let answer) where answer.status == .serviceUnavailable:
            refusal = context.channel.allocator.buffer(capacity: 256)
        case .head(let answer):
            ready.fail(GatewaySocketError.refused(answer.status.code))
            context.close(promise: nil)
        case .body(var part):
            if refusal != nil, (refusal?.readableBytes ?? 0) + part.readableBytes <= 4096 { refusal?.writeBuffer(&part) }
        case .end:
            guard let body = refusal else { return }
            ready.fail(Self.cap(in: body).map { GatewaySocketError.atCapacity(cap: $0) } ?? .refused(503))
            context.close(promise: nil)
        }
    }

    /// `cap` of the service's `{"reason":"AtCapacity","cap":N}`; nil for another 503.
    static func cap(in body: ByteBuffer) -> Int? {
        struct Refusal: Decodable {
            var reason: String
            var cap: Int
        }
        guard let refusal = try? JSONDecoder().decode(Refusal.self, from: Data(body.readableBytesView)), refusal.reason == "AtCapacity" else {
            return nil
        }
        return refusal.cap
    }

    func channelInactive(context: ChannelHandlerContext) {
        ready.fail(refusal != nil ? GatewaySocketError.refused(503) : GatewaySocketError.closed)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        ready.fail(error)
        context.close(promise: nil)
    }
}

/// Asks for the WebSocket upgrade and, once the gateway agreed, puts the device's frame handler
/// in place. NIO's own upgrader would add its frame decoder and encoder as well
/// (``WebSocketFrameReader`` says why they are not wanted).
package final class GatewayUpgrader: NIOHTTPClientProtocolUpgrader, @unchecked Sendable {
    // @unchecked: `frames` is handed over once, on the channel's event loop, by NIO's upgrade.
    let supportedProtocol = "websocket"
    let requiredUpgradeHeaders: [String] = []
    private let key = NIOWebSocketClientUpgrader.randomRequestKey()
    private let frames: GatewayFrames

    init(frames: GatewayFrames) {
        self.frames = frames
    }

    func addCustom(upgradeRequestHeaders: inout HTTPHeaders) {
        upgradeRequestHeaders.add(name: "Sec-WebSocket-Key", value: key)
        upgradeRequestHeaders.add(name: "Sec-WebSocket-Version", value: "13")
    }

    /// RFC 6455 §4.1: the answer's accept value is the key's digest.
    func shouldAllowUpgrade(upgradeResponse: HTTPResponseHead) -> Bool {
        let accept = upgradeResponse.headers["Sec-WebSocket-Accept"]
        return accept.count == 1 && accept[0] == Self.accept(for: key)
    }

    package static func accept(for key: String) -> String {
        Data(Insecure.SHA1.hash(data: Data((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").utf8))).base64EncodedString()
    }

    func upgrade(context: ChannelHandlerContext, upgradeResponse: HTTPResponseHead) -> EventLoopFuture<Void> {
        context.eventLoop.makeCompletedFuture {
            let operations = context.pipeline.syncOperations
            try operations.addHandler(frames)
            if let request = try? operations.handler(type: UpgradeRequest.self) {
                operations.removeHandler(request, promise: nil)
            }
        }
    }
}
