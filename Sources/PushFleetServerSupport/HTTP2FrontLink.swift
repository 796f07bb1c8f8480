import NIOCore
import NIOHTTP2

/// What an HTTP/2 connection's front (``HTTP2ConnectionFront``) and its frame routes after NIO's
/// handler (``HTTP2FrameRoutes``) share: answers decided at the front that NIO's side writes (they
/// have a body, which flow control must see), and NIO's open streams, for the front's idle timeout.
/// Used on the connection's event loop only.
final class HTTP2FrontLink {
    /// Answers for streams handed on in the current read, by stream.
    var answers: [HTTP2StreamID: CompleteResponse] = [:]
    /// Streams open at NIO's handler.
    var openStreams = 0
    /// When NIO's last open stream closed.
    var lastStreamClosed = NIODeadline.now()
}
