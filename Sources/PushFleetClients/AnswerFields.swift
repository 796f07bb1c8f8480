import NIOCore
package import NIOHTTP1

/// An answer's header fields. The pool keeps them as the bytes they came in, already checked by
/// `HTTP1ResponseParser`, and makes `HTTPHeaders` only when a caller reads them: most answers'
/// fields are never read, and building them for every answer cost a sixth of a request's CPU.
package struct AnswerFields: Sendable {
    private enum Storage: Sendable {
        case headers(HTTPHeaders)
        /// Field lines, each ended by LF or CRLF, with no empty line; every line has a token
        /// name before its colon.
        case lines(ByteBuffer)
    }

    private let storage: Storage

    package init(_ headers: HTTPHeaders = [:]) {
        storage = .headers(headers)
    }

    /// Lines the parser has checked.
    init(checkedLines: ByteBuffer) {
        storage = .lines(checkedLines)
    }

    /// The fields in the order they came, each value without its surrounding spaces and tabs.
    package var headers: HTTPHeaders {
        switch storage {
        case .headers(let headers): return headers
        case .lines(let bytes): return Self.read(bytes)
        }
    }

    private static func read(_ bytes: ByteBuffer) -> HTTPHeaders {
        var headers = HTTPHeaders()
        bytes.withUnsafeReadableBytes { raw in
            var at = 0
            while at < raw.count {
                var end = at
                while end < raw.count, raw[end] != 0x0A { end += 1 }
                let next = end + 1
                if end > at, raw[end - 1] == 0x0D { end -= 1 }
                var colon = at
                while colon < end, raw[colon] != UInt8(ascii: ":") { colon += 1 }
                var start = colon + 1
                while start < end, raw[start] == 0x20 || raw[start] == 0x09 { start += 1 }
                while end > start, raw[end - 1] == 0x20 || raw[end - 1] == 0x09 { end -= 1 }
                headers.add(
                    name: String(decoding: UnsafeRawBufferPointer(rebasing: raw[at..<colon]), as: UTF8.self),
                    value: start < end ? String(decoding: UnsafeRawBufferPointer(rebasing: raw[start..<end]), as: UTF8.self) : ""
                )
                at = next
            }
        }
        return headers
    }
}
