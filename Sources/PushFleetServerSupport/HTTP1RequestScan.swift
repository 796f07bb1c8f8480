public import HTTPTypes

#if canImport(Glibc)
import Glibc
#endif

/// Reads one HTTP/1.1 request head from the start of a connection's bytes, for
/// ``HTTP1FastPath``: a strict subset of RFC 9112, the shape every HTTP client writes for a
/// provider request (origin-form target, `HTTP/1.1`, CRLF lines, at most one `Content-Length`).
/// Anything else is ``Outcome/unsupported`` and goes to NIO's parser (llhttp), which decides:
/// this reader never refuses what it does not take, so it cannot answer differently from the
/// server behind it, only pass the request on.
///
/// Why a reader of our own: the provider path's profile had NIO's decoder, the conversion of its
/// head to `HTTPRequest` and the handlers between them at over a third of the push service's
/// CPU (docs/design.md, "The push service's HTTP/1.1 fast path").
public enum HTTP1RequestScan {
    public enum Outcome {
        /// The head is not complete yet.
        case incomplete
        /// Not of the subset read here: the bytes go to the full parser as they are.
        case unsupported
        case request(Head)
    }

    public struct Head {
        /// As NIO's conversion makes it: the `Host` field becomes the authority.
        public var request: HTTPRequest
        /// Bytes of the head, its empty line included.
        public var length: Int
        public var contentLength: Int
        /// The request said `Connection: close`.
        public var closes: Bool
    }

    /// Heads longer than this go to the full parser, whose limits answer them.
    public static let maxHeadLength = 8 * 1024
    /// Fields past this many, likewise.
    public static let maxFields = 64
    /// Longer declared bodies likewise (a route's own cap is far lower).
    static let maxContentLengthDigits = 9

    public static func scan(_ bytes: UnsafeRawBufferPointer) -> Outcome {
        var memo = LineMemo()
        return scan(bytes, memo: &memo)
    }

    /// Reads a head as ``scan(_:)`` does; a field line the connection's previous head had at the
    /// same place, byte for byte, makes what it made then (``LineMemo``).
    public static func scan(_ bytes: UnsafeRawBufferPointer, memo: inout LineMemo) -> Outcome {
        guard let end = headEnd(bytes) else {
            return bytes.count >= maxHeadLength ? .unsupported : .incomplete
        }
        var reader = LineReader(bytes: bytes, end: end)
        guard let (method, target) = reader.requestLine() else { return .unsupported }
        // Nil while every line so far is the memo's: the previous head's fields may then serve whole.
        var fields: HTTPFields?
        var host: String?
        var contentLength: Int?
        var closes = false
        var count = 0
        while true {
            let start = reader.position
            if count < memo.lines.count, !memo.lines[count].isVolatile, reader.repeats(memo.lines[count].bytes) {
                count += 1
                guard count <= maxFields else { return .unsupported }
                // Read in place: a repeated line's field is copied out of the memo only when the
                // head's fields are made anew, not while the previous head's serve.
                guard Self.take(memo.lines[count - 1].effect, fields: &fields, host: &host, contentLength: &contentLength, closes: &closes)
                else { return .unsupported }
                continue
            }
            guard let line = reader.nextLine() else { break }
            guard let (name, value) = line, let effect = lineEffect(name: name, value: value) else { return .unsupported }
            if fields == nil { fields = memo.fields(ofFirst: count) }
            memo.remember(effect, line: reader.slice(start, reader.position), at: count)
            count += 1
            guard count <= maxFields else { return .unsupported }
            guard Self.take(effect, fields: &fields, host: &host, contentLength: &contentLength, closes: &closes) else { return .unsupported }
        }
        let headerFields = fields ?? memo.fields(ofFirst: count)
        memo.settle(headerFields, lines: count)
        let request = HTTPRequest(method: method, scheme: "http", authority: host, path: target, headerFields: headerFields)
        return .request(Head(request: request, length: end, contentLength: contentLength ?? 0, closes: closes))
    }

    /// Adds what a line made to the head read so far; false when it repeats the host or the length.
    @inline(__always)
    private static func take(
        _ effect: borrowing LineMemo.Effect, fields: inout HTTPFields?, host: inout String?, contentLength: inout Int?, closes: inout Bool
    ) -> Bool {
        switch effect {
        case .host(let value):
            guard host == nil else { return false }
            host = value
        case .contentLength(let length, let field):
            guard contentLength == nil else { return false }
            contentLength = length
            fields?.append(field)
        case .connection(let closing, let field):
            if closing { closes = true }
            fields?.append(field)
        case .field(let field):
            fields?.append(field)
        }
        return true
    }

    /// What one field line makes; nil for a field outside the subset.
    static func lineEffect(name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) -> LineMemo.Effect? {
        let special = Special(name)
        switch special {
        case .host: return .host(text(value))
        case .unsupported: return nil
        default: break
        }
        guard let fieldName = KnownNames.name(name) ?? HTTPField.Name(text(name)) else { return nil }
        let field = HTTPField(name: fieldName, value: text(value))
        switch special {
        case .contentLength:
            guard let length = decimal(value) else { return nil }
            return .contentLength(length, field)
        case .connection:
            if containsLowercased(value, "upgrade") { return nil }
            return .connection(closes: containsLowercased(value, "close"), field)
        default:
            return .field(field)
        }
    }

    /// The offset just past the head's empty line (`\r\n\r\n`), if it is within the bytes and
    /// ``maxHeadLength``.
    static func headEnd(_ bytes: UnsafeRawBufferPointer) -> Int? {
        let limit = min(bytes.count, maxHeadLength)
        guard limit >= 4 else { return nil }
        var index = 3
        while index < limit {
            let byte = bytes[index]
            if byte == 0x0A {
                if bytes[index - 1] == 0x0D, bytes[index - 2] == 0x0A, bytes[index - 3] == 0x0D { return index + 1 }
                index += 1
            } else if byte == 0x0D {
                index += 1
            } else {
                // Neither CR nor LF: no `\r\n\r\n` ends within the next three bytes.
                index += 4
            }
        }
        return nil
    }

    /// Fields this reader acts on or leaves to the full parser.
    enum Special {
        case host, contentLength, connection, unsupported

        init?(_ name: UnsafeRawBufferPointer) {
            switch name.count {
            case 4 where equalsLowercased(name, "host"): self = .host
            case 14 where equalsLowercased(name, "content-length"): self = .contentLength
            case 10 where equalsLowercased(name, "connection"): self = .connection
            // Bodies other than `Content-Length`, upgrades and `100-continue` take the parser's path.
            case 17 where equalsLowercased(name, "transfer-encoding"),
                7 where equalsLowercased(name, "upgrade"),
                6 where equalsLowercased(name, "expect"):
                self = .unsupported
            default: return nil
            }
        }
    }

    /// `word` (lowercase) occurs in the bytes, in any case: what `lowercased().contains` says of
    /// ASCII, with no strings made.
    static func containsLowercased(_ bytes: UnsafeRawBufferPointer, _ word: StaticString) -> Bool {
        let count = word.utf8CodeUnitCount
        guard bytes.count >= count else { return false }
        for start in 0...(bytes.count - count) where equalsLowercased(UnsafeRawBufferPointer(rebasing: bytes[start..<(start + count)]), word) {
            return true
        }
        return false
    }

    static func equalsLowercased(_ bytes: UnsafeRawBufferPointer, _ name: StaticString) -> Bool {
        guard bytes.count == name.utf8CodeUnitCount else { return false }
        let expected = name.utf8Start
        for index in 0..<bytes.count {
            let byte = bytes[index]
            let lower = byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte
            if lower != expected[index] { return false }
        }
        return true
    }

    /// The field names provider requests carry, made once: a name written exactly so (the
    /// lowercase form HTTP/2 and most clients send) is this one, with no check or copy per request.
    enum KnownNames {
        static let table: [(bytes: [UInt8], name: HTTPField.Name)] = [
            "authorization", "content-type", "content-length", "connection", "user-agent", "accept", "accept-encoding",
            "apns-topic", "apns-id", "apns-expiration", "apns-priority", "apns-push-type", "apns-collapse-id",
            "ttl", "urgency", "topic", "content-encoding", "crypto-key", "encryption",
            "x-wns-type", "x-wns-ttl", "x-wns-cache-policy", "x-wns-tag", "x-wns-group", "x-wns-requestforstatus",
        ].compactMap { text in HTTPField.Name(text).map { (Array(text.utf8), $0) } }

        static func name(_ bytes: UnsafeRawBufferPointer) -> HTTPField.Name? {
            for entry in table where entry.bytes.count == bytes.count {
                if entry.bytes.withUnsafeBytes({ memcmp($0.baseAddress!, bytes.baseAddress!, bytes.count) }) == 0 { return entry.name }
            }
            return nil
        }
    }

    /// Digits only, no sign or spaces, at most ``maxContentLengthDigits``.
    static func decimal(_ bytes: UnsafeRawBufferPointer) -> Int? {
        guard !bytes.isEmpty, bytes.count <= maxContentLengthDigits else { return nil }
        var value = 0
        for byte in bytes {
            guard byte >= 0x30, byte <= 0x39 else { return nil }
            value = value * 10 + Int(byte - 0x30)
        }
        return value
    }

    static func text(_ bytes: UnsafeRawBufferPointer) -> String {
        String(decoding: bytes, as: UTF8.self)
    }

    /// The head's lines, each checked for the subset's grammar as it is read.
    struct LineReader {
        let bytes: UnsafeRawBufferPointer
        /// Just past the head's empty line.
        let end: Int
        var position = 0

        init(bytes: UnsafeRawBufferPointer, end: Int) {
            self.bytes = bytes
            self.end = end
        }

        /// The next line is `line` (a field line with its CRLF), byte for byte: read past it.
        mutating func repeats(_ line: [UInt8]) -> Bool {
            guard position + line.count <= end else { return false }
            let same = line.withUnsafeBytes { memcmp(bytes.baseAddress! + position, $0.baseAddress!, line.count) == 0 }
            if same { position += line.count }
            return same
        }

        /// `METHOD SP origin-form SP HTTP/1.1 CRLF`; nil for any other form.
        mutating func requestLine() -> (HTTPRequest.Method, String)? {
            var index = 0
            while index < end, isTokenByte(bytes[index]) { index += 1 }
            guard index > 0, index <= 16, index < end, bytes[index] == 0x20 else { return nil }
            let methodEnd = index
            index += 1
            let targetStart = index
            guard index < end, bytes[index] == 0x2F else { return nil }
            while index < end, bytes[index] > 0x20, bytes[index] < 0x7F { index += 1 }
            let targetEnd = index
            let version = "HTTP/1.1\r\n".utf8
            guard index < end, bytes[index] == 0x20, end - index - 1 >= version.count else { return nil }
            index += 1
            for expected in version {
                guard bytes[index] == expected else { return nil }
                index += 1
            }
            position = index
            // The methods the fast routes take; any other (HEAD's answer has no body) goes on.
            let method: HTTPRequest.Method
            switch methodEnd {
            case 4 where startsWith("POST"): method = .post
            case 3 where startsWith("GET"): method = .get
            case 3 where startsWith("PUT"): method = .put
            case 6 where startsWith("DELETE"): method = .delete
            default: return nil
            }
            return (method, text(slice(targetStart, targetEnd)))
        }

        /// The next field line as its name and trimmed value; nil at the empty line; `.some(nil)`
        /// for a line outside the subset (a folded line, bytes no field value has, a bare CR or
        /// LF, no colon).
        mutating func nextLine() -> (name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer)?? {
            let start = position
            guard start + 2 <= end else { return .some(nil) }
            if bytes[start] == 0x0D { return bytes[start + 1] == 0x0A && start + 2 == end ? nil : .some(nil) }
            var index = start
            while index < end, isTokenByte(bytes[index]) { index += 1 }
            guard index > start, index < end, bytes[index] == 0x3A else { return .some(nil) }
            let nameEnd = index
            index += 1
            while index < end, bytes[index] == 0x20 || bytes[index] == 0x09 { index += 1 }
            let valueStart = index
            var valueEnd = index
            while index < end {
                let byte = bytes[index]
                if byte == 0x0D { break }
                guard byte == 0x09 || (byte >= 0x20 && byte < 0x7F) else { return .some(nil) }
                index += 1
                if byte != 0x20, byte != 0x09 { valueEnd = index }
            }
            guard index + 1 < end, bytes[index] == 0x0D, bytes[index + 1] == 0x0A else { return .some(nil) }
            position = index + 2
            return .some((slice(start, nameEnd), slice(valueStart, valueEnd)))
        }

        /// The bytes begin with `literal`, exactly.
        func startsWith(_ literal: StaticString) -> Bool {
            let count = literal.utf8CodeUnitCount
            guard bytes.count >= count else { return false }
            return memcmp(bytes.baseAddress!, literal.utf8Start, count) == 0
        }

        func slice(_ from: Int, _ to: Int) -> UnsafeRawBufferPointer {
            UnsafeRawBufferPointer(rebasing: bytes[from..<to])
        }

        /// RFC 9110's tchar.
        func isTokenByte(_ byte: UInt8) -> Bool {
            switch byte {
            case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: true
            case 0x21, 0x23, 0x24, 0x25, 0x26, 0x27, 0x2A, 0x2B, 0x2D, 0x2E, 0x5E, 0x5F, 0x60, 0x7C, 0x7E: true
            default: false
            }
        }
    }
}

extension HTTP1RequestScan.Outcome: CustomStringConvertible {
    /// Everything the outcome says, field names as written included: two readings of the same
    /// bytes agree when their descriptions do.
    public var description: String {
        switch self {
        case .incomplete: return "incomplete"
        case .unsupported: return "unsupported"
        case .request(let head):
            let fields = head.request.headerFields.map { "\($0.name.rawName)=\($0.value)" }.joined(separator: "|")
            return "\(head.request.method) \(head.request.path ?? "") \(head.request.authority ?? "-") [\(fields)] \(head.length) \(head.contentLength) \(head.closes)"
        }
    }
}
