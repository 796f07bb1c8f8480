import PushFleetEmbedded
import PushFleetMockPush
import PushFleetServerSupport
import PushFleetTestSupport
import PushFleetWire
import Testing

/// The push service's HTTP/2 connections answer provider requests before NIO's handler sees
/// them, so their idle timeout is kept there too: NIO's connection manager would count only the
/// streams that reach NIO.
@Suite("HTTP/2 connections answered at their front")
struct HTTP2ConnectionFrontTests {
    /// Pushes every 200 ms for 4 s against a 3 s idle timeout: the connection stays, every push
    /// is answered; once they stop, GOAWAY (NO_ERROR, the last stream) and a close. A push would
    /// have to come 15 times late to be cut off, so a loaded machine does not fail it; the rule
    /// itself is tested with an injected clock (`HTTP2IdleTimeout`).
    @Test("a connection whose pushes are answered at its front is not idle; once they stop it gets GOAWAY NO_ERROR after the idle timeout and is closed")
    func idleTimeout() async throws {
        var configuration = HTTP2FrameRoutesTests.configuration()
        configuration.pushServer.http2Limits = ServerLimits(idleTimeout: .seconds(3))
        let streams = (0..<20).map { UInt32(1 + 2 * $0) }
        var parts: [(delay: Duration, bytes: [UInt8])] = []
        for stream in streams {
            let push = HTTP2FrameRoutesTests.push(stream, body: HTTP2FrameRoutesTests.alert).now
            parts.append(stream == 1 ? (.zero, HTTP2Wire.preface + push) : (.milliseconds(200), push))
        }
        let sent = parts
        try await TestSystem.run(configuration) { (system: TestSystem) async throws in
            let outcome = try await RawStream.run(port: HTTP2FrameRoutesTests.port(system.pushServiceHTTP2!), sent, wait: .seconds(60))
            let frames = HTTP2Wire.frames(outcome.bytes)
            #expect(HTTP2Wire.statuses(outcome.bytes) == Dictionary(uniqueKeysWithValues: streams.map { ($0, "200") }), "\(frames)")
            let goAway = frames.last { $0.type == HTTP2Wire.goAwayType }
            #expect(goAway?.payload == [0, 0, 0, 39, 0, 0, 0, 0], "\(frames)")
            #expect(frames.last?.type == HTTP2Wire.goAwayType)
            // Not before the idle timeout had passed since the last push (sent at 3.8 s at the earliest).
            #expect(try #require(outcome.closedAfter) >= 6.7)
            #expect(try await system.pushStats().accepted == 20)
        }
    }

    /// A WINDOW_UPDATE of 0 on the connection is a connection error NIO answers; a push after it
    /// in the same write, one the front would answer, must not be acted on, and the connection
    /// closes after the GOAWAY (RFC 9113 §5.4.1).
    @Test("a frame NIO refuses as a connection error, then a push in the same write: GOAWAY PROTOCOL_ERROR and a close, the push neither answered nor accepted")
    func errorBeforePush() async throws {
        let bad = HTTP2Wire.frame(type: 8, flags: 0, stream: 0, [0, 0, 0, 0])
        // The connection's first push goes to the router, which verifies its provider token; the
        // next is answered at the front.
        let first = HTTP2FrameRoutesTests.push(1, body: HTTP2FrameRoutesTests.alert).now
        let next = HTTP2FrameRoutesTests.push(3, body: HTTP2FrameRoutesTests.alert).now
        try await TestSystem.run(HTTP2FrameRoutesTests.configuration()) { (system: TestSystem) async throws in
            let parts: [(delay: Duration, bytes: [UInt8])] = [(.zero, HTTP2Wire.preface + first), (.milliseconds(500), bad + next)]
            let outcome = try await RawStream.run(port: HTTP2FrameRoutesTests.port(system.pushServiceHTTP2!), parts, wait: .seconds(60))
            let frames = HTTP2Wire.frames(outcome.bytes)
            #expect(HTTP2Wire.statuses(outcome.bytes) == [1: "200"], "\(frames)")
            let goAway = frames.first { $0.type == HTTP2Wire.goAwayType }
            #expect(goAway.map { Array($0.payload.dropFirst(4).prefix(4)) } == [0, 0, 0, 1], "\(frames)")
            #expect(outcome.closedAfter != nil)
            #expect(try await system.pushStats().accepted == 1)
        }
    }
}
