package import HTTPTypes
package import NIOCore
package import NIOHTTPTypes

/// What ``EventLoopRoutes`` does with each request part, without a channel: a pure machine.
///
/// Answers keep their requests' order: a request is answered here only when no request handed to
/// the router is still waiting for its answer, and one answered here is answered when its last
/// part arrives, before the next request's first. One answered later (it waits on another
/// server) holds every part after it, and the connection's next read, until it is answered.
package struct EventLoopRoutesState: Sendable {
    package enum Inbound: Equatable, Sendable {
        /// Keep the part: it belongs to a request answered here.
        case hold
        /// Pass the part on to the router.
        case forward
        /// The request answered here is complete: answer it.
        case answer(head: HTTPRequest, body: ByteBuffer?)
    }

    private struct Collecting {
        var head: HTTPRequest
        var body: ByteBuffer?
        var limit: Int
        var tooLarge = false
    }

    private var collecting: Collecting?
    /// A request's answer is owed here, later (``answersLater()``).
    package private(set) var answeringLater = false
    /// Parts read while an answer is owed here, in order.
    private var waiting: [HTTPRequestPart] = []
    /// The pipeline asked for a read while an answer was owed here.
    private var readWanted = false

    package init() {}
    /// Requests handed to the router whose answers have not ended.
    package private(set) var forwarded = 0

    package mutating func head(_ head: HTTPRequest, bodyLimit: (HTTPRequest) -> Int?) -> Inbound {
        if forwarded == 0, let limit = bodyLimit(head) {
            collecting = Collecting(head: head, limit: limit)
            return .hold
        }
        forwarded += 1
        return .forward
    }

    package mutating func body(_ bytes: ByteBuffer) -> Inbound {
        guard var request = collecting else { return .forward }
        collecting = nil
        if !request.tooLarge {
            if request.body == nil {
                request.body = bytes
            } else {
                var bytes = bytes
                request.body!.writeBuffer(&bytes)
            }
            if request.body!.readableBytes > request.limit {
                // Past the limit: only enough is kept to show it, should the router read it.
                request.tooLarge = true
                request.body = request.body!.getSlice(at: request.body!.readerIndex, length: request.limit + 1)
            }
        }
        collecting = request
        return .hold
    }

    package mutating func end() -> Inbound {
        guard let request = collecting else { return .forward }
        collecting = nil
        lastBody = request.body
        return .answer(head: request.head, body: request.tooLarge ? nil : (request.body ?? ByteBuffer()))
    }

    /// The body of the request last answered (``Inbound/answer(head:body:)``) as it was read: past
    /// its limit, the limit and one byte more. What the router is given if the request is handed
    /// over, so that it too finds a body too large.
    package private(set) var lastBody: ByteBuffer?

    /// An answer the router wrote ended.
    package mutating func routerAnswerEnded() {
        forwarded = max(0, forwarded - 1)
    }

    /// Whether `part` must wait for the answer owed here; it is then kept, to come back from
    /// ``answeredLater()``.
    package mutating func waits(_ part: HTTPRequestPart) -> Bool {
        guard answeringLater else { return false }
        waiting.append(part)
        return true
    }

    /// The request last answered (``Inbound/answer(head:body:)``) is answered later.
    package mutating func answersLater() {
        answeringLater = true
    }

    /// Whether a read the pipeline asks for goes on now. Once a part waits for the answer owed
    /// here, reads wait too: a client that sends request after request is read no further
    /// meanwhile. Until then they go on, as a client that waits for its answer sends nothing,
    /// and a read stopped and restarted costs two system calls.
    package mutating func read() -> Bool {
        guard answeringLater, !waiting.isEmpty else { return true }
        readWanted = true
        return false
    }

    /// The answer owed here was written: the parts that waited, to be read again in order, and
    /// whether a read waited.
    package mutating func answeredLater() -> (parts: [HTTPRequestPart], read: Bool) {
        answeringLater = false
        defer {
            waiting = []
            readWanted = false
        }
        return (waiting, readWanted)
    }

    /// A request held here goes to the router after all (its answer needs asynchronous work).
    package mutating func handedOver() {
        forwarded += 1
    }

}
