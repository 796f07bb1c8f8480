public import HTTPTypes
public import NIOCore

/// Requests a server answers on the event loop that read them, without the router's task: the
/// hot provider requests of the push service. Anything else, and any request whose answer needs
/// asynchronous work after all, goes on to the router unchanged.
public protocol EventLoopResponder: Sendable {
    /// The route of a request this responder may answer, with the most body bytes to read for
    /// it; nil leaves the request to the router.
    func route(for head: HTTPRequest) -> EventLoopRoute?

    /// The answer to a request whose body was read (nil: longer than its limit); nil leaves the
    /// request to the router.
    func respond(_ route: EventLoopRoute, head: HTTPRequest, body: ByteBuffer?, channel: any Channel) -> CompleteResponse?

    /// The answer of a request that waits on something outside (another server) but needs no
    /// task of its own, as a future (on any loop, never failing); nil leaves the request to
    /// ``respond(_:head:body:channel:)``. Asked on HTTP/1.1 connections behind the full pipeline
    /// (``EventLoopRoutes``), which keep the connection's later requests until it is answered.
    func respondLater(_ route: EventLoopRoute, head: HTTPRequest, body: ByteBuffer?, channel: any Channel) -> EventLoopFuture<CompleteResponse>?
}

extension EventLoopResponder {
    public func respondLater(_ route: EventLoopRoute, head: HTTPRequest, body: ByteBuffer?, channel: any Channel) -> EventLoopFuture<CompleteResponse>? {
        nil
    }
}

/// What a head told about its request, kept until its body is read: the head is read once.
/// Concrete rather than the responder's own type, so the handlers that hold it are not generic:
/// a generic handler, called by NIO through its protocols, looks its types' metadata up at run
/// time on every frame.
public struct EventLoopRoute: Sendable {
    /// Which of the responder's routes, in its own numbering.
    public var kind: Int
    /// The part of the path the route names (a device token, a project).
    public var parameter: Substring
    /// The most body bytes to read.
    public var bodyLimit: Int

    public init(kind: Int, parameter: Substring, bodyLimit: Int) {
        self.kind = kind
        self.parameter = parameter
        self.bodyLimit = bodyLimit
    }
}

extension EventLoopResponder {
    /// The handler that installs these routes on a connection or stream.
    func installer() -> any RemovableChannelHandler { EventLoopRoutes.Installer(responder: self) }
}

/// A response known whole, head and body: written at once on the event loop, or handed to the
/// router as a `Response`.
public struct CompleteResponse: Sendable {
    public var status: HTTPResponse.Status
    public var headers: HTTPFields
    public var body: ByteBuffer

    public init(status: HTTPResponse.Status, headers: HTTPFields = [:], body: ByteBuffer = ByteBuffer()) {
        self.status = status
        self.headers = headers
        self.body = body
    }
}
