package import NIOCore
import NIOHTTP2

/// What an HTTP/2 connection's front (``HTTP2ConnectionFront``) and its frame routes after NIO's
/// handler (``HTTP2FrameRoutes``) share: answers decided at the front that NIO's side writes (they
/// have a body, which flow control must see), and the connection's idle timeout, which needs both
/// sides' activity. Used on the connection's event loop only.
final class HTTP2FrontLink {
    /// Answers for streams handed on in the current read, by stream.
    var answers: [HTTP2StreamID: CompleteResponse] = [:]
    /// Streams open at NIO's handler.
    var openStreams = 0
    var idle: HTTP2IdleTimeout

    init(idleTimeout: TimeAmount, now: NIODeadline) {
        idle = HTTP2IdleTimeout(timeout: idleTimeout, now: now)
    }
}

/// When an HTTP/2 connection answered partly at its front is idle: no stream open at NIO's
/// handler and, for the whole timeout, no request answered at the front and no stream closed at
/// NIO's. A pure rule with the clock passed in.
package struct HTTP2IdleTimeout {
    package let timeout: TimeAmount
    private var lastActivity: NIODeadline

    package init(timeout: TimeAmount, now: NIODeadline) {
        self.timeout = timeout
        lastActivity = now
    }

    /// A request was answered at the front, or NIO's last open stream closed.
    package mutating func active(now: NIODeadline) {
        if now > lastActivity { lastActivity = now }
    }

    /// Checked at `now`: nil when the connection is idle (GOAWAY and close), else when to check again.
    package func check(now: NIODeadline, openStreams: Int) -> NIODeadline? {
        guard openStreams == 0 else { return now + timeout }
        let due = lastActivity + timeout
        return now >= due ? nil : due
    }
}
