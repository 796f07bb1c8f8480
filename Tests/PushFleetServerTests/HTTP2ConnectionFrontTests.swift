import HTTPTypes
import NIOCore
import NIOEmbedded
import PushFleetEmbedded
import PushFleetMockPush
@testable import PushFleetServerSupport
import PushFleetTestSupport
import PushFleetWire
import Testing

/// The push service's HTTP/2 connections answer provider requests before NIO's handler sees
/// them, so their idle timeout is kept there too: NIO's connection manager would count only the
/// streams that reach NIO.
@Suite("HTTP/2 connections answered at their front")
struct HTTP2ConnectionFrontTests {
    /// Answers every `/3/device/` POST with 200 and no body, on the loop.
    struct Answering: EventLoopResponder {
        func route(for head: HTTPRequest) -> EventLoopRoute? {
            head.path?.hasPrefix("/3/device/") == true ? EventLoopRoute(kind: 0, parameter: "", bodyLimit: 4096) : nil
        }

        func respond(_ route: EventLoopRoute, head: HTTPRequest, body: ByteBuffer?, channel: any Channel) -> CompleteResponse? {
            CompleteResponse(status: .ok)
        }
    }

    static func push(_ stream: UInt32) -> ByteBuffer {
        ByteBuffer(bytes: HTTP2FrameRoutesTests.push(stream, body: HTTP2FrameRoutesTests.alert).now)
    }

    /// The handler on an embedded loop, whose clock the test moves: the rule's wiring without
    /// a socket or a wall clock (the rule itself: `HTTP2IdleTimeout`'s tests).
    @Test("on a loop whose clock the test moves: requests answered at the front keep the connection; a stream open at NIO holds it; GOAWAY NO_ERROR and a close one idle timeout after the last activity")
    func idleOnLoop() throws {
        let loop = EmbeddedEventLoop()
        let channel = EmbeddedChannel(loop: loop)
        let link = HTTP2FrontLink(idleTimeout: .seconds(1), now: loop.now)
        try channel.pipeline.syncOperations.addHandler(HTTP2ConnectionFront(responder: Answering(), link: link))
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        var sent: [UInt8] = []
        func drain() throws {
            while let out = try channel.readOutbound(as: ByteBuffer.self) { sent += out.readableBytesView }
            while try channel.readInbound(as: ByteBuffer.self) != nil {}
        }
        try channel.writeInbound(ByteBuffer(bytes: HTTP2Wire.preface + HTTP2FrameRoutesTests.push(1, body: HTTP2FrameRoutesTests.alert).now))
        // A push every 800 ms for 4 s against a 1 s timeout.
        for index in 1...5 {
            loop.advanceTime(by: .milliseconds(800))
            try channel.writeInbound(Self.push(UInt32(1 + 2 * index)))
        }
        try drain()
        #expect(channel.isActive)
        #expect(HTTP2Wire.frames(sent).filter { $0.type == HTTP2Wire.headersType }.map(\.stream) == [1, 3, 5, 7, 9, 11])
        // A stream open at NIO's handler: not idle, however long.
        link.openStreams = 1
        loop.advanceTime(by: .seconds(5))
        #expect(channel.isActive)
        // It closes (the frame routes note the time); one timeout later, GOAWAY and the close.
        link.openStreams = 0
        link.idle.active(now: loop.now)
        loop.advanceTime(by: .milliseconds(999))
        try drain()
        #expect(channel.isActive)
        #expect(!HTTP2Wire.frames(sent).contains { $0.type == HTTP2Wire.goAwayType })
        loop.advanceTime(by: .seconds(1))
        try drain()
        #expect(HTTP2Wire.frames(sent).last.map { [$0.type] + $0.payload } == [HTTP2Wire.goAwayType, 0, 0, 0, 11, 0, 0, 0, 0])
        #expect(!channel.isActive)
    }

    /// On the real h2c port: a push answered at the front, then nothing; the connection gets its
    /// GOAWAY one idle timeout later. A loaded machine may start the client's write after the
    /// timeout: the server then rightly sends a GOAWAY naming no stream, and accepts nothing, and
    /// the test is made again with a timeout six times as long.
    @Test("on the h2c port, a push answered at the front and then nothing: GOAWAY NO_ERROR naming the push's stream, and a close, after the idle timeout")
    func idleTimeout() async throws {
        let push = HTTP2FrameRoutesTests.push(1, body: HTTP2FrameRoutesTests.alert).now
        let timeouts = [10, 60]
        for (attempt, timeout) in timeouts.enumerated() {
            var configuration = MockPushTests.withHTTP2()
            configuration.pushServer.http2Limits = ServerLimits(idleTimeout: .seconds(timeout))
            let wroteLate = try await TestSystem.run(configuration) { (system: TestSystem) async throws -> Bool in
                let port = HTTP2FrameRoutesTests.port(system.pushServiceHTTP2!)
                let outcome = try await RawStream.run(port: port, [(.zero, HTTP2Wire.preface + push)], wait: .seconds(timeout + 110))
                let frames = HTTP2Wire.frames(outcome.bytes)
                let lastFrame = frames.last.map { [$0.type] + $0.payload }
                let accepted = try await system.pushStats().accepted
                if attempt < timeouts.count - 1, HTTP2Wire.statuses(outcome.bytes).isEmpty, accepted == 0,
                    lastFrame == [HTTP2Wire.goAwayType, 0, 0, 0, 0, 0, 0, 0, 0]
                {
                    return true
                }
                #expect(HTTP2Wire.statuses(outcome.bytes) == [1: "200"], "\(frames)")
                #expect(lastFrame == [HTTP2Wire.goAwayType, 0, 0, 0, 1, 0, 0, 0, 0], "\(frames)")
                #expect(try #require(outcome.closedAfter) >= Double(timeout) - 0.5)
                #expect(accepted == 1)
                return false
            }
            if !wroteLate { return }
        }
    }

    /// A WINDOW_UPDATE of 0 on the connection is a connection error NIO answers; a push after it
    /// in the same write, one the front would answer, must not be acted on, and the connection
    /// closes after the GOAWAY (RFC 9113 §5.4.1).
    @Test("a frame NIO refuses as a connection error, then a push in the same write: GOAWAY PROTOCOL_ERROR and a close, the push neither answered nor accepted")
    func errorBeforePush() async throws {
        let bad = HTTP2Wire.frame(type: 8, flags: 0, stream: 0, [0, 0, 0, 0])
        let push = HTTP2FrameRoutesTests.push(1, body: HTTP2FrameRoutesTests.alert).now
        try await TestSystem.run(MockPushTests.withHTTP2()) { (system: TestSystem) async throws in
            // The same push alone, on a connection of its own, is answered at the front.
            let alone = try await RawStream.run(port: HTTP2FrameRoutesTests.port(system.pushServiceHTTP2!), [(.zero, HTTP2Wire.preface + push)], wait: .seconds(60)) { bytes in
                HTTP2Wire.statuses(bytes)[1] != nil
            }
            #expect(HTTP2Wire.statuses(alone.bytes) == [1: "200"])
            let outcome = try await RawStream.run(port: HTTP2FrameRoutesTests.port(system.pushServiceHTTP2!), [(.zero, HTTP2Wire.preface + bad + push)], wait: .seconds(60))
            let frames = HTTP2Wire.frames(outcome.bytes)
            #expect(!frames.contains { $0.type == HTTP2Wire.headersType }, "\(frames)")
            let goAway = frames.first { $0.type == HTTP2Wire.goAwayType }
            #expect(goAway.map { Array($0.payload.dropFirst(4).prefix(4)) } == [0, 0, 0, 1], "\(frames)")
            #expect(outcome.closedAfter != nil)
            #expect(try await system.pushStats().accepted == 1)
        }
    }
}
