import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOWebSocket
import PushFleetClients
import PushFleetWire
import Synchronization
import Testing

/// A device's own socket against a WebSocket server that writes what the test says: whole
/// and fragmented messages, and fragments that break the protocol.
@Suite("Device socket frames")
struct GatewaySocketTests {
    /// Writes `frames` once the upgrade is done.
    final class Script: ChannelInboundHandler, Sendable {
        typealias InboundIn = WebSocketFrame
        typealias OutboundOut = WebSocketFrame
        let frames: [WebSocketFrame]
        init(_ frames: [WebSocketFrame]) { self.frames = frames }
        func handlerAdded(context: ChannelHandlerContext) {
            for frame in frames { context.write(wrapOutboundOut(frame), promise: nil) }
            context.flush()
        }
        func channelRead(context: ChannelHandlerContext, data: NIOAny) {}
    }

    static func serve(_ frames: [WebSocketFrame], _ body: (Int) async throws -> Void) async throws {
        let upgrader = NIOWebSocketServerUpgrader(
            shouldUpgrade: { channel, _ in channel.eventLoop.makeSucceededFuture(HTTPHeaders()) },
            upgradePipelineHandler: { channel, _ in channel.pipeline.addHandler(Script(frames)) }
        )
        let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { channel in
                channel.pipeline.configureHTTPServerPipeline(withServerUpgrade: (upgraders: [upgrader], completionHandler: { _ in }))
            }
            .bind(host: "127.0.0.1", port: 0).get()
        defer { server.close(promise: nil) }
        try await body(server.localAddress!.port!)
    }

    static func text(_ string: String, fin: Bool = true, continuation: Bool = false) -> WebSocketFrame {
        WebSocketFrame(fin: fin, opcode: continuation ? .continuation : .text, data: ByteBuffer(string: string))
    }

    static let subscribed = String(decoding: try! JSONEncoder().encode(GatewayNotice(type: .subscribed, devices: [])), as: UTF8.self)

    static func push(_ token: String) -> String {
        String(decoding: try! JSONEncoder().encode(PushFrame(platform: .apns, token: token, id: "i", acceptedAt: 1, pushType: "alert", body: String(repeating: "b", count: 900))), as: UTF8.self)
    }

    final class Received: Sendable {
        let tokens = Mutex<[String]>([])
    }

    @Test("a push in three fragments and a confirmation in two arrive whole, between pings")
    func fragments() async throws {
        let push = Self.push("t-frag")
        let thirds = [push.prefix(300), push.dropFirst(300).prefix(300), push.dropFirst(600)].map(String.init)
        let frames = [
            Self.text(thirds[0], fin: false),
            WebSocketFrame(fin: true, opcode: .ping, data: ByteBuffer(string: "p")),
            Self.text(thirds[1], fin: false, continuation: true),
            Self.text(thirds[2], continuation: true),
            Self.text(String(Self.subscribed.prefix(5)), fin: false),
            Self.text(String(Self.subscribed.dropFirst(5)), continuation: true),
        ]
        try await Self.serve(frames) { port in
            let received = Received()
            let socket = try await GatewaySocket.open(
                host: "127.0.0.1", port: port, uri: "/device", group: MultiThreadedEventLoopGroup.singleton, source: nil, timeout: .seconds(120)
            ) { inbound, _ in
                if case .push(let frame) = inbound { received.tokens.withLock { $0.append(frame.token) } }
            }
            #expect(received.tokens.withLock { $0 } == ["t-frag"], "the push, whole, before the confirmation")
            socket.close()
        }
    }

    @Test("a fragment of no message, or a new message inside one, closes the socket before it is confirmed", arguments: [0, 1])
    func brokenFragments(case index: Int) async throws {
        let frames =
            index == 0
            ? [Self.text("{", continuation: true), Self.text(Self.subscribed)]
            : [Self.text("{\"ty", fin: false), Self.text(Self.subscribed)]
        try await Self.serve(frames) { port in
            await #expect(throws: GatewaySocketError.closed) {
                _ = try await GatewaySocket.open(
                    host: "127.0.0.1", port: port, uri: "/device", group: MultiThreadedEventLoopGroup.singleton, source: nil, timeout: .seconds(120)
                ) { _, _ in }
            }
        }
    }
}
