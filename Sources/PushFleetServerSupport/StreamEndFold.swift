import NIOCore
import NIOHPACK
package import NIOHTTP2

/// Which frames of an HTTP/2 answer to send, so that its last frame carries END_STREAM, as
/// APNs's answers do: a final HEADERS without a body ends the stream itself, and a body's last
/// DATA frame ends it, never an empty DATA frame after it.
///
/// The HTTP/2 codec ends every answer with an empty DATA frame, and Hummingbird may write an empty
/// body chunk too. That is valid HTTP/2, but some clients read every DATA frame of an APNs answer
/// as its JSON error body (aioapns fails on an empty one and resends the stream's push on a new
/// connection, so the device gets it twice). Pure: `Token` is what the caller completes for each
/// write (a promise), handed back with the frame that carries it; the tokens of writes folded
/// into one frame are joined by `combine`. Nothing is allocated per frame: it runs on every
/// stream of the servers.
package struct StreamEndFold<Token> {
    package typealias Frame = (payload: HTTP2Frame.FramePayload, token: Token)

    /// What one write sends now: nothing, one frame, or a held frame and then another.
    package struct Sends {
        package var first: Frame?
        package var second: Frame?
    }

    /// The last final HEADERS or DATA frame not ending the stream, until the next write or flush.
    private var held: Frame?
    private let combine: (Token, Token) -> Token

    package init(combine: @escaping (Token, Token) -> Token) {
        self.combine = combine
    }

    package mutating func write(_ payload: HTTP2Frame.FramePayload, _ token: Token) -> Sends {
        if case .data(let data) = payload, data.data.readableBytes == 0, var kept = held {
            kept.token = combine(kept.token, token)
            guard data.endStream else {
                // An empty chunk carries nothing: its write completes with the frame kept.
                held = kept
                return Sends()
            }
            held = nil
            kept.payload.setEndStream()
            return Sends(first: kept)
        }
        let before = held
        held = nil
        if payload.isHoldable {
            held = (payload, token)
            return Sends(first: before)
        }
        return before == nil ? Sends(first: (payload, token)) : Sends(first: before, second: (payload, token))
    }

    /// What a flush sends: a held frame goes, so a streamed answer's chunks are never delayed.
    package mutating func flush() -> Frame? {
        defer { held = nil }
        return held
    }

    /// The token of a held frame that will not be sent (the stream went away).
    package mutating func drop() -> Token? {
        defer { held = nil }
        return held?.token
    }
}

extension HTTP2Frame.FramePayload {
    /// A final HEADERS frame or a DATA frame that leaves the stream open.
    fileprivate var isHoldable: Bool {
        switch self {
        case .headers(let headers):
            // Informational (1xx) heads go as they come; trailers end the stream anyway.
            return !headers.endStream && headers.headers.first(name: ":status")?.first != "1"
        case .data(let data):
            return !data.endStream
        default:
            return false
        }
    }

    fileprivate mutating func setEndStream() {
        switch self {
        case .headers(var headers):
            headers.endStream = true
            self = .headers(headers)
        case .data(var data):
            data.endStream = true
            self = .data(data)
        default:
            break
        }
    }
}
