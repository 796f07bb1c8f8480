#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
package import NIOCore
package import NIOHTTP1
import PushFleetCore

/// Why an answer could not be read; the connection it came on is closed.
package enum HTTP1ParseError: Error, Equatable, Sendable {
    case malformed(String)
    case headTooLarge
    case bodyTooLarge
    /// The connection ended inside an answer whose end is not the close.
    case truncated
}

/// One whole answer.
package struct HTTP1Response: Sendable {
    package var status: Int
    package var fields: AnswerFields
    package var body: ByteBuffer
    /// The connection may carry another exchange after this one.
    package var keepAlive: Bool
    /// The seconds the server said it keeps the connection idle (`Keep-Alive: timeout=`), when
    /// it said.
    package var keepAliveTimeout: Int? = nil

    package var headers: HTTPHeaders { fields.headers }
}

/// Reads HTTP/1.1 answers (RFC 9112) from a connection's bytes: the status line and fields, a
/// body framed by `Content-Length`, chunked coding (extensions and trailers skipped) or the close,
/// interim 1xx answers skipped. A pure type: the pool's handler feeds it what the socket reads.
///
/// The pool's own reader instead of NIO's HTTP decoder: a keep-alive GET/POST needs none of its
/// streaming parts, and without the decoder, its request encoder and header validator a request
/// costs 18% less CPU (docs/performance.md). It accepts what llhttp accepts for the
/// answers a backend sends, a bare LF as a line's end included; it refuses folded fields, a
/// field name with a space before its colon, and lengths that disagree.
package struct HTTP1ResponseParser {
    enum State {
        case head
        case fixed(remaining: Int)
        case chunkSize
        case chunkData(remaining: Int)
        case chunkEnd
        /// With the bytes of trailer fields read so far, bounded as a head is.
        case trailers(read: Int)
        case untilClose
    }

    let maxHead: Int
    let maxBody: Int
    var state = State.head
    /// Bytes read and not yet taken. Emptied once taken, so the event loop can reuse its
    /// receive buffer for the next read.
    var buffer = Self.empty
    static let empty = ByteBuffer()
    /// Where the head's scan for its end resumes, from `buffer`'s reader index.
    var scanned = 0
    var expectsBody = true
    var status = 0
    var minorVersion = 1
    var fields = AnswerFields()
    var keepAlive = true
    var keepAliveTimeout: Int?
    var body: ByteBuffer?

    package init(maxHead: Int = 80 * 1024, maxBody: Int) {
        self.maxHead = maxHead
        self.maxBody = maxBody
    }

    /// Readies the parser for the answer to the next request; `expectsBody` is false for HEAD.
    package mutating func expect(body expectsBody: Bool) {
        self.expectsBody = expectsBody
    }

    /// Bytes received beyond the last whole answer, stray line ends left out: an answer nobody
    /// asked for yet, so the connection is out of step.
    package var leftover: ByteBufferView { buffer.readableBytesView }

    /// Whether `bytes` are only line ends, which may stray between answers (as llhttp allows).
    package static func onlyLineEnds(_ bytes: ByteBufferView) -> Bool {
        bytes.allSatisfy { $0 == 0x0D || $0 == 0x0A }
    }

    /// Whether anything of an answer has been read.
    package var started: Bool {
        if case .head = state { return buffer.readableBytes > 0 }
        return true
    }

    /// Takes bytes read from the connection; the answer once it is whole.
    package mutating func feed(_ bytes: inout ByteBuffer) throws(HTTP1ParseError) -> HTTP1Response? {
        if buffer.readableBytes == 0 {
            buffer = bytes
        } else {
            buffer.writeBuffer(&bytes)
        }
        return try advance()
    }

    /// The connection ended: the answer when its body runs to the close, nil when nothing of
    /// one had come.
    package mutating func end() throws(HTTP1ParseError) -> HTTP1Response? {
        switch state {
        case .untilClose: return finish(keepAlive: false)
        case .head where buffer.readableBytes == 0: return nil
        default: throw .truncated
        }
    }

    private mutating func advance() throws(HTTP1ParseError) -> HTTP1Response? {
        while true {
            switch state {
            case .head:
                guard let headEnd = try findHeadEnd() else { return nil }
                if let response = try readHead(length: headEnd) { return response }
            case .fixed(let remaining):
                let taken = take(upTo: remaining)
                guard taken == remaining else {
                    state = .fixed(remaining: remaining - taken)
                    return nil
                }
                return finish(keepAlive: keepAlive)
            case .chunkSize:
                guard let line = nextLine() else { return try lineTooLong() }
                let size = try chunkSize(line)
                if size == 0 {
                    state = .trailers(read: 0)
                } else {
                    guard (body?.readableBytes ?? 0) + size <= maxBody else { throw .bodyTooLarge }
                    state = .chunkData(remaining: size)
                }
            case .chunkData(let remaining):
                let taken = take(upTo: remaining)
                guard taken == remaining else {
                    state = .chunkData(remaining: remaining - taken)
                    return nil
                }
                state = .chunkEnd
            case .chunkEnd:
                guard let line = nextLine() else { return try lineTooLong() }
                guard line.isEmpty else { throw .malformed("chunk longer than its size") }
                state = .chunkSize
            case .trailers(let read):
                guard let line = nextLine() else { return try lineTooLong() }
                if line.isEmpty { return finish(keepAlive: keepAlive) }
                guard read + line.count <= maxHead else { throw .headTooLarge }
                state = .trailers(read: read + line.count + 2)
            case .untilClose:
                _ = take(upTo: Int.max)
                guard (body?.readableBytes ?? 0) <= maxBody else { throw .bodyTooLarge }
                return nil
            }
        }
    }

    // MARK: Body

    /// Moves up to `count` bytes into the body; how many it moved.
    private mutating func take(upTo count: Int) -> Int {
        let taken = min(count, buffer.readableBytes)
        guard taken > 0 else { return 0 }
        var part = buffer.readSlice(length: taken)!
        if body == nil {
            body = part
        } else {
            body!.writeBuffer(&part)
        }
        return taken
    }

    /// The next line of the body's framing without its CRLF (or bare LF), nil until it ends.
    private mutating func nextLine() -> ByteBufferView? {
        let end: Int? = buffer.withUnsafeReadableBytes { raw in
            guard let base = raw.baseAddress, let newline = memchr(base, 0x0A, raw.count) else { return nil }
            return base.distance(to: UnsafeRawPointer(newline))
        }
        guard let end else { return nil }
        var line = buffer.readSlice(length: end + 1)!.readableBytesView.dropLast()
        if line.last == 0x0D { line = line.dropLast() }
        return line
    }

    private func lineTooLong() throws(HTTP1ParseError) -> HTTP1Response? {
        if buffer.readableBytes > maxHead { throw .headTooLarge }
        return nil
    }

    private func chunkSize(_ line: ByteBufferView) throws(HTTP1ParseError) -> Int {
        var size = 0
        var digits = 0
        var index = line.startIndex
        while index < line.endIndex, let value = Self.hexValue(line[index]) {
            digits += 1
            guard digits <= 15 else { throw .bodyTooLarge }
            size = size << 4 | value
            index = line.index(after: index)
        }
        guard digits > 0 else { throw .malformed("chunk size is not hexadecimal") }
        while index < line.endIndex, line[index] == 0x20 || line[index] == 0x09 { index = line.index(after: index) }
        guard index == line.endIndex || line[index] == UInt8(ascii: ";") else { throw .malformed("chunk size is not hexadecimal") }
        return size
    }

    private static func hexValue(_ byte: UInt8) -> Int? {
        Hex.value(byte).map(Int.init)
    }

    /// Stray line ends before a status line are skipped, as llhttp does.
    mutating func skipLineEnds() {
        while let byte = buffer.readableBytesView.first, byte == 0x0D || byte == 0x0A { buffer.moveReaderIndex(forwardBy: 1) }
    }

    mutating func finish(keepAlive: Bool) -> HTTP1Response {
        let response = HTTP1Response(
            status: status, fields: fields, body: body ?? Self.empty, keepAlive: keepAlive, keepAliveTimeout: keepAliveTimeout)
        keepAliveTimeout = nil
        state = .head
        skipLineEnds()
        if buffer.readableBytes == 0 { buffer = Self.empty }
        body = nil
        fields = AnswerFields()
        return response
    }
}

extension String {
    /// Equal to `lowercase`, an ASCII lowercase word, ignoring ASCII case.
    func equalsLowercase(_ lowercase: StaticString) -> Bool {
        guard utf8.count == lowercase.utf8CodeUnitCount else { return false }
        return lowercase.withUTF8Buffer { expected in
            zip(utf8, expected).allSatisfy { byte, want in byte | 0x20 == want || byte == want }
        }
    }
}
