#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
package import NIOCore
package import NIOHTTP1

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
    package var headers: HTTPHeaders
    package var body: ByteBuffer
    /// The connection may carry another exchange after this one.
    package var keepAlive: Bool
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
    private enum State {
        case head
        case fixed(remaining: Int)
        case chunkSize
        case chunkData(remaining: Int)
        case chunkEnd
        /// With the bytes of trailer fields read so far, bounded as a head is.
        case trailers(read: Int)
        case untilClose
    }

    private let maxHead: Int
    private let maxBody: Int
    private var state = State.head
    /// Bytes read and not yet taken. Emptied once taken, so the event loop can reuse its
    /// receive buffer for the next read.
    private var buffer = Self.empty
    private static let empty = ByteBuffer()
    /// Where the head's scan for its end resumes, from `buffer`'s reader index.
    private var scanned = 0
    private var expectsBody = true
    private var status = 0
    private var headers = HTTPHeaders()
    private var keepAlive = true
    private var body: ByteBuffer?

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

    // MARK: Head

    /// The head's length up to and including its empty line, nil until it has come.
    private mutating func findHeadEnd() throws(HTTP1ParseError) -> Int? {
        if scanned == 0 { skipLineEnds() }
        let found: Int? = buffer.withUnsafeReadableBytes { raw in
            guard let base = raw.baseAddress else { return nil }
            var at = scanned
            while at < raw.count, let newline = memchr(base + at, 0x0A, raw.count - at) {
                let end = base.distance(to: UnsafeRawPointer(newline))
                let length = end - at
                at = end + 1
                // An empty line (or one of only CR) ends the head.
                if length == 0 || (length == 1 && raw[end - 1] == 0x0D) { return at }
            }
            // The scan resumes at the start of the line not yet ended.
            scanned = at
            return nil
        }
        if let found {
            scanned = 0
            return found
        }
        if buffer.readableBytes > maxHead { throw .headTooLarge }
        return nil
    }

    /// Reads a head of `length` bytes: the answer when it has no body, else nil with the body's
    /// framing set.
    private mutating func readHead(length: Int) throws(HTTP1ParseError) -> HTTP1Response? {
        guard length <= maxHead else { throw .headTooLarge }
        var lines = HeadLines(buffer.readSlice(length: length)!)
        guard let statusLine = lines.next() else { throw .malformed("no status line") }
        try readStatusLine(statusLine)
        var contentLength: Int?
        var chunked = false
        var transferEncoded = false
        var connectionClose = false
        var connectionKeepAlive = false
        headers = HTTPHeaders()
        headers.reserveCapacity(12)
        while let line = lines.next(), !line.isEmpty {
            let (name, value) = try field(line)
            headers.add(name: name, value: value)
            if name.equalsLowercase("content-length") {
                // One number, or a list of equal ones (RFC 9110 §8.6).
                let parts = Self.isLength(value[...]) ? [value[...]] : value.split(separator: ",", omittingEmptySubsequences: false)
                for part in parts {
                    let digits = part.trimmingSpaces
                    guard Self.isLength(digits), let parsed = Int(digits) else { throw .malformed("Content-Length is not a number") }
                    guard contentLength == nil || contentLength == parsed else { throw .malformed("Content-Length values disagree") }
                    contentLength = parsed
                }
            } else if name.equalsLowercase("transfer-encoding") {
                transferEncoded = true
                let codings = value.lowercased().split(separator: ",").map(\.trimmingSpaces)
                chunked = codings.last == "chunked"
            } else if name.equalsLowercase("connection") {
                for token in value.lowercased().split(separator: ",").map(\.trimmingSpaces) {
                    if token == "close" { connectionClose = true }
                    if token == "keep-alive" { connectionKeepAlive = true }
                }
            }
        }
        keepAlive = minorVersion == 1 ? !connectionClose : (connectionKeepAlive && !connectionClose)
        if (100..<200).contains(status) {
            guard status != 101 else { throw .malformed("101 Switching Protocols to a request that asked for none") }
            // An interim answer: the final one follows.
            return nil
        }
        body = nil
        if !expectsBody || status == 204 || status == 304 { return finish(keepAlive: keepAlive) }
        if transferEncoded {
            // RFC 9112 §6.3: chunked decides over any length; another coding runs to the close.
            if contentLength != nil { keepAlive = false }
            if chunked {
                state = .chunkSize
            } else {
                keepAlive = false
                state = .untilClose
            }
        } else if let contentLength {
            guard contentLength <= maxBody else { throw .bodyTooLarge }
            if contentLength == 0 { return finish(keepAlive: keepAlive) }
            state = .fixed(remaining: contentLength)
        } else {
            keepAlive = false
            state = .untilClose
        }
        return nil
    }

    private var minorVersion = 1

    private mutating func readStatusLine(_ line: ByteBufferView) throws(HTTP1ParseError) {
        // HTTP/1.x SP 3DIGIT [SP reason]
        let s = line.startIndex
        guard line.count >= 12, line[s..<s + 7].elementsEqual("HTTP/1.".utf8), line[s + 7] == 0x30 || line[s + 7] == 0x31, line[s + 8] == 0x20
        else { throw .malformed("not an HTTP/1.x status line") }
        minorVersion = Int(line[s + 7] - 0x30)
        var code = 0
        for digit in line[s + 9..<s + 12] {
            guard digit >= 0x30, digit <= 0x39 else { throw .malformed("status code is not three digits") }
            code = code * 10 + Int(digit - 0x30)
        }
        guard code >= 100 else { throw .malformed("status code below 100") }
        if line.count > 12, line[s + 12] != 0x20 { throw .malformed("status code is not three digits") }
        for byte in line[(s + 12)...] where (byte < 0x20 && byte != 0x09) || byte == 0x7F {
            throw .malformed("control character in the reason phrase")
        }
        status = code
    }

    /// A field line's name and value, the value's surrounding spaces trimmed.
    private func field(_ line: ByteBufferView) throws(HTTP1ParseError) -> (String, String) {
        guard let first = line.first, first != 0x20, first != 0x09 else { throw .malformed("folded field line") }
        guard let colon = line.firstIndex(of: UInt8(ascii: ":")), colon > line.startIndex else {
            throw .malformed("field line without a name")
        }
        let name = line[line.startIndex..<colon]
        guard name.allSatisfy(Self.isTokenByte) else { throw .malformed("field name is not a token") }
        var start = line.index(after: colon)
        var end = line.endIndex
        while start < end, line[start] == 0x20 || line[start] == 0x09 { start = line.index(after: start) }
        while end > start, line[line.index(before: end)] == 0x20 || line[line.index(before: end)] == 0x09 { end = line.index(before: end) }
        let value = line[start..<end]
        for byte in value where (byte < 0x20 && byte != 0x09) || byte == 0x7F {
            throw .malformed("control character in a field value")
        }
        return (String(decoding: name, as: UTF8.self), String(decoding: value, as: UTF8.self))
    }

    private static func isLength(_ text: Substring) -> Bool {
        !text.isEmpty && text.utf8.count <= 18 && text.utf8.allSatisfy { $0 >= 0x30 && $0 <= 0x39 }
    }

    static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
        case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"), UInt8(ascii: "'"),
            UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "^"), UInt8(ascii: "_"),
            UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
            true
        default: false
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
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): Int(byte - UInt8(ascii: "0"))
        case UInt8(ascii: "a")...UInt8(ascii: "f"): Int(byte - UInt8(ascii: "a") + 10)
        case UInt8(ascii: "A")...UInt8(ascii: "F"): Int(byte - UInt8(ascii: "A") + 10)
        default: nil
        }
    }

    /// Stray line ends before a status line are skipped, as llhttp does.
    private mutating func skipLineEnds() {
        while let byte = buffer.readableBytesView.first, byte == 0x0D || byte == 0x0A { buffer.moveReaderIndex(forwardBy: 1) }
    }

    private mutating func finish(keepAlive: Bool) -> HTTP1Response {
        let response = HTTP1Response(status: status, headers: headers, body: body ?? Self.empty, keepAlive: keepAlive)
        state = .head
        skipLineEnds()
        if buffer.readableBytes == 0 { buffer = Self.empty }
        body = nil
        headers = HTTPHeaders()
        return response
    }
}

/// The lines of a head, each without its CRLF or bare LF.
private struct HeadLines {
    let view: ByteBufferView
    var at: Int

    init(_ bytes: ByteBuffer) {
        self.view = bytes.readableBytesView
        self.at = view.startIndex
    }

    mutating func next() -> ByteBufferView? {
        guard at < view.endIndex, let newline = view[at...].firstIndex(of: 0x0A) else { return nil }
        var line = view[at..<newline]
        if line.last == 0x0D { line = line.dropLast() }
        at = newline + 1
        return line
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

extension Substring {
    fileprivate var trimmingSpaces: Substring {
        var result = self
        while let first = result.first, first == " " || first == "\t" { result = result.dropFirst() }
        while let last = result.last, last == " " || last == "\t" { result = result.dropLast() }
        return result
    }
}
