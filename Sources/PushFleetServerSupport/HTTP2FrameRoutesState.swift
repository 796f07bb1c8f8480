package import HTTPTypes
package import NIOCore
package import NIOHTTP2

/// Which HTTP/2 streams a connection answers at its frames, before a stream channel exists, and
/// what becomes of each frame and event: a pure machine, tested without a channel.
///
/// A stream is taken at its HEADERS when the responder claims the request, and answered once its
/// request has ended, if that happens within the read that brought its HEADERS (a client sends a
/// provider request's HEADERS and DATA at once). Everything about it is held meanwhile, in order:
/// a stream whose request is still open when the read completes, whose body passes its limit, or
/// whose answer needs asynchronous work after all is handed over, its held frames and events
/// replayed to the stream multiplexer as if they had just arrived, and from then on it is any
/// other stream. So a slow or unusual request gets every guard of the stream-channel path (body
/// timeout, size cap, stall accounting), and the fast path needs none of them.
///
/// `Item` is what the caller replays: a frame or an event.
package struct HTTP2FrameRoutesState<Route, Item> {
    package enum Inbound {
        /// Pass the item on: it belongs to a stream that is not held here.
        case forward
        /// Keep the item: it belongs to a stream held here.
        case hold
        /// Drop the item: its stream was answered here, and nothing after the answer matters.
        case drop
        /// The held stream's request ended: answer it, or hand it over (``handOver(_:)``).
        case answer(HTTP2StreamID, Route, HTTPRequest, ByteBuffer)
        /// Replay these, in order, then treat the stream as any other.
        case replay([Item])
        /// The stream's header block is malformed: reset the stream (PROTOCOL_ERROR) and drop
        /// the frame. A stream the multiplexer never saw is forgotten here until it closes.
        case reset(HTTP2StreamID)
    }

    private struct Stream {
        var route: Route
        var head: HTTPRequest
        var limit: Int
        var body: ByteBuffer?
        var held: [Item]
        /// Answered: its frames and events are dropped until it closes.
        var answered = false
    }

    private var streams: [HTTP2StreamID: Stream] = [:]
    /// Streams reset for a malformed first header block: their frames and events are dropped
    /// until they close.
    private var reset: Set<HTTP2StreamID> = []
    /// The highest stream the client opened: HEADERS on a stream at or below it are trailers.
    private var lastStreamID = HTTP2StreamID.rootStream

    package init() {}

    /// Streams held or answered and not yet closed.
    package var heldStreams: Int { streams.count }

    /// A HEADERS frame. `isValid` judges its block, as trailers (true) or as a request's first
    /// block (false). `claim` is asked only for a well-formed stream this frame opens: the
    /// request's route, head and body limit, or nil to leave it to the stream channels.
    package mutating func headers(
        _ id: HTTP2StreamID, endStream: Bool, item: Item, isValid: (_ trailers: Bool) -> Bool, claim: () -> (Route, HTTPRequest, Int)?
    ) -> Inbound {
        if !reset.isEmpty, reset.contains(id) { return .drop }
        if let answered = streams[id]?.answered {
            guard !answered else { return .drop }
            guard isValid(true) else {
                streams[id] = nil
                reset.insert(id)
                return .reset(id)
            }
            // Trailers: they end the request; their fields are not part of what is judged.
            streams[id]!.held.append(item)
            return endStream ? requestEnded(id) : .hold
        }
        // Trailers of a stream the multiplexer has: reset there, its events still go on.
        guard id > lastStreamID else { return isValid(true) ? .forward : .reset(id) }
        lastStreamID = id
        guard isValid(false) else {
            reset.insert(id)
            return .reset(id)
        }
        guard let (route, head, limit) = claim() else { return .forward }
        streams[id] = Stream(route: route, head: head, limit: limit, held: [item])
        return endStream ? requestEnded(id) : .hold
    }

    /// A DATA frame.
    package mutating func data(_ id: HTTP2StreamID, _ bytes: ByteBuffer, endStream: Bool, item: Item) -> Inbound {
        if !reset.isEmpty, reset.contains(id) { return .drop }
        // Changed in place: a copy taken out of the dictionary would copy its held items too.
        guard let index = streams.index(forKey: id) else { return .forward }
        guard !streams.values[index].answered else { return .drop }
        streams.values[index].held.append(item)
        let length = (streams.values[index].body?.readableBytes ?? 0) + bytes.readableBytes
        if length > streams.values[index].limit {
            // Past the limit: the stream channel's body guard answers it.
            return .replay(streams.remove(at: index).value.held)
        }
        if bytes.readableBytes > 0 {
            if streams.values[index].body == nil {
                streams.values[index].body = bytes
            } else {
                var bytes = bytes
                streams.values[index].body!.writeBuffer(&bytes)
            }
        }
        return endStream ? requestEnded(id) : .hold
    }

    /// An event about a stream (its creation, a window update): held with a held stream, so that
    /// a replay gives the multiplexer what it would have seen.
    package mutating func event(_ id: HTTP2StreamID, item: Item) -> Inbound {
        if !reset.isEmpty, reset.contains(id) { return .drop }
        guard let index = streams.index(forKey: id) else { return .forward }
        guard !streams.values[index].answered else { return .drop }
        streams.values[index].held.append(item)
        return .hold
    }

    /// Any other frame on a stream (WINDOW_UPDATE, RST_STREAM): a held or answered stream's is
    /// dropped (its request is answered here or not at all); a reset forgets the stream.
    package mutating func otherFrame(_ id: HTTP2StreamID, isReset: Bool) -> Inbound {
        if !reset.isEmpty, reset.contains(id) { return .drop }
        guard streams[id] != nil else { return .forward }
        if isReset { streams[id] = nil }
        return .drop
    }

    /// The stream closed (the answer's END_STREAM went out, or it was reset).
    package mutating func closed(_ id: HTTP2StreamID) -> Inbound {
        if !reset.isEmpty, reset.remove(id) != nil { return .drop }
        guard streams.removeValue(forKey: id) != nil else { return .forward }
        return .drop
    }

    /// The stream held for ``Inbound/answer(_:_:_:_:)`` was answered.
    package mutating func answered(_ id: HTTP2StreamID) {
        streams[id]?.answered = true
        streams[id]?.held = []
        streams[id]?.body = nil
    }

    /// The stream held for ``Inbound/answer(_:_:_:_:)`` goes to the stream channels after all:
    /// what to replay.
    package mutating func handOver(_ id: HTTP2StreamID) -> [Item] {
        streams.removeValue(forKey: id)?.held ?? []
    }

    /// The read completed: every stream still held is handed over, lowest first. What to replay.
    package mutating func readComplete() -> [Item] {
        guard streams.values.contains(where: { !$0.answered }) else { return [] }
        let open = streams.filter { !$0.value.answered }.keys.sorted()
        var items: [Item] = []
        for id in open { items += handOver(id) }
        return items
    }

    private mutating func requestEnded(_ id: HTTP2StreamID) -> Inbound {
        guard let stream = streams[id] else { return .forward }
        return .answer(id, stream.route, stream.head, stream.body ?? ByteBuffer())
    }
}
