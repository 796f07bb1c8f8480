#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import NIOCore

/// The head: found, checked and read over its raw bytes in one pass. Only the framing fields
/// become values here; the rest stay bytes until a caller reads them (`AnswerFields`).
extension HTTP1ResponseParser {
    /// What a head says about the answer's framing.
    private struct Head {
        var status = 0
        var minorVersion = 1
        /// Where the field lines start and end within the head.
        var fields = 0..<0
        var contentLength: Int?
        var transferEncoded = false
        var chunked = false
        var connectionClose = false
        var connectionKeepAlive = false
        var keepAliveTimeout: Int?
    }

    /// The head's length up to and including its empty line, nil until it has come.
    mutating func findHeadEnd() throws(HTTP1ParseError) -> Int? {
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
    mutating func readHead(length: Int) throws(HTTP1ParseError) -> HTTP1Response? {
        guard length <= maxHead else { throw .headTooLarge }
        let bytes = buffer.readSlice(length: length)!
        let head = try bytes.withUnsafeReadableBytes { raw in Self.scan(raw) }.get()
        status = head.status
        minorVersion = head.minorVersion
        fields = AnswerFields(checkedLines: bytes.getSlice(at: bytes.readerIndex + head.fields.lowerBound, length: head.fields.count)!)
        keepAlive = minorVersion == 1 ? !head.connectionClose : (head.connectionKeepAlive && !head.connectionClose)
        keepAliveTimeout = head.keepAliveTimeout
        if (100..<200).contains(status) {
            guard status != 101 else { throw .malformed("101 Switching Protocols to a request that asked for none") }
            // An interim answer: the final one follows.
            return nil
        }
        body = nil
        if !expectsBody || status == 204 || status == 304 { return finish(keepAlive: keepAlive) }
        if head.transferEncoded {
            // RFC 9112 §6.3: chunked decides over any length; another coding runs to the close.
            if head.contentLength != nil { keepAlive = false }
            if head.chunked {
                state = .chunkSize
            } else {
                keepAlive = false
                state = .untilClose
            }
        } else if let contentLength = head.contentLength {
            guard contentLength <= maxBody else { throw .bodyTooLarge }
            if contentLength == 0 { return finish(keepAlive: keepAlive) }
            state = .fixed(remaining: contentLength)
        } else {
            keepAlive = false
            state = .untilClose
        }
        return nil
    }

    /// The status line and every field line checked, the framing fields read. `raw` ends with
    /// the head's empty line.
    private static func scan(_ raw: UnsafeRawBufferPointer) -> Result<Head, HTTP1ParseError> {
        var head = Head()
        var at = 0
        /// The next line's bounds without its LF or CRLF, and where the line after it starts.
        func nextLine() -> (Range<Int>, next: Int)? {
            guard at < raw.count, let base = raw.baseAddress, let newline = memchr(base + at, 0x0A, raw.count - at) else { return nil }
            let lf = base.distance(to: UnsafeRawPointer(newline))
            let end = lf > at && raw[lf - 1] == 0x0D ? lf - 1 : lf
            return (at..<end, lf + 1)
        }
        guard let (statusLine, afterStatus) = nextLine() else { return .failure(.malformed("no status line")) }
        if let error = readStatusLine(raw, statusLine, into: &head) { return .failure(error) }
        at = afterStatus
        let fieldsStart = at
        while let (line, next) = nextLine(), !line.isEmpty {
            if let error = readField(raw, line, into: &head) { return .failure(error) }
            at = next
        }
        head.fields = fieldsStart..<at
        return .success(head)
    }

    private static func readStatusLine(_ raw: UnsafeRawBufferPointer, _ line: Range<Int>, into head: inout Head) -> HTTP1ParseError? {
        // HTTP/1.x SP 3DIGIT [SP reason]
        let s = line.lowerBound
        guard line.count >= 12, memcmp(raw.baseAddress! + s, "HTTP/1.", 7) == 0, raw[s + 7] == 0x30 || raw[s + 7] == 0x31, raw[s + 8] == 0x20
        else { return .malformed("not an HTTP/1.x status line") }
        head.minorVersion = Int(raw[s + 7] - 0x30)
        var code = 0
        for at in s + 9..<s + 12 {
            let digit = raw[at]
            guard digit >= 0x30, digit <= 0x39 else { return .malformed("status code is not three digits") }
            code = code * 10 + Int(digit - 0x30)
        }
        guard code >= 100 else { return .malformed("status code below 100") }
        if line.count > 12, raw[s + 12] != 0x20 { return .malformed("status code is not three digits") }
        for at in s + 12..<line.upperBound where isControl(raw[at]) {
            return .malformed("control character in the reason phrase")
        }
        head.status = code
        return nil
    }

    /// Checks a field line; reads it when it frames the body or says how the connection goes on.
    private static func readField(_ raw: UnsafeRawBufferPointer, _ line: Range<Int>, into head: inout Head) -> HTTP1ParseError? {
        let first = raw[line.lowerBound]
        guard first != 0x20, first != 0x09 else { return .malformed("folded field line") }
        var colon = line.lowerBound
        while colon < line.upperBound, isTokenByte(raw[colon]) { colon += 1 }
        guard colon < line.upperBound, raw[colon] == UInt8(ascii: ":"), colon > line.lowerBound else {
            let hasColon = raw[line].contains(UInt8(ascii: ":"))
            return hasColon && raw[line.lowerBound] != UInt8(ascii: ":")
                ? .malformed("field name is not a token") : .malformed("field line without a name")
        }
        var start = colon + 1
        var end = line.upperBound
        while start < end, raw[start] == 0x20 || raw[start] == 0x09 { start += 1 }
        while end > start, raw[end - 1] == 0x20 || raw[end - 1] == 0x09 { end -= 1 }
        for at in start..<end where isControl(raw[at]) {
            return .malformed("control character in a field value")
        }
        let name = line.lowerBound..<colon
        let value = start..<end
        if equalsLowercase(raw, name, "content-length") {
            // One number, or a list of equal ones (RFC 9110 §8.6).
            var failure: HTTP1ParseError?
            forEachPart(raw, value, omittingEmpty: false) { part in
                guard failure == nil else { return }
                if let parsed = length(raw, part) {
                    if head.contentLength == nil || head.contentLength == parsed {
                        head.contentLength = parsed
                    } else {
                        failure = .malformed("Content-Length values disagree")
                    }
                } else {
                    failure = .malformed("Content-Length is not a number")
                }
            }
            return failure
        } else if equalsLowercase(raw, name, "transfer-encoding") {
            head.transferEncoded = true
            var last: Range<Int>?
            forEachPart(raw, value, omittingEmpty: true) { last = $0 }
            head.chunked = last.map { equalsLowercase(raw, $0, "chunked") } ?? false
        } else if equalsLowercase(raw, name, "connection") {
            forEachPart(raw, value, omittingEmpty: true) { token in
                if equalsLowercase(raw, token, "close") { head.connectionClose = true }
                if equalsLowercase(raw, token, "keep-alive") { head.connectionKeepAlive = true }
            }
        } else if equalsLowercase(raw, name, "keep-alive") {
            // `timeout=5, max=100` (RFC 2068 §19.7.1.1): only the timeout is read; a value that
            // is not a number of seconds is no announcement.
            forEachPart(raw, value, omittingEmpty: true) { part in
                guard let seconds = timeoutParameter(raw, part) else { return }
                head.keepAliveTimeout = min(head.keepAliveTimeout ?? .max, seconds)
            }
        }
        return nil
    }

    /// The seconds of a `timeout=N` parameter (spaces around `=`, quotes around N allowed),
    /// capped at a day; nil for any other parameter or a value that is not digits.
    private static func timeoutParameter(_ raw: UnsafeRawBufferPointer, _ part: Range<Int>) -> Int? {
        guard let equals = part.first(where: { raw[$0] == UInt8(ascii: "=") }) else { return nil }
        var nameEnd = equals
        while nameEnd > part.lowerBound, raw[nameEnd - 1] == 0x20 || raw[nameEnd - 1] == 0x09 { nameEnd -= 1 }
        guard equalsLowercase(raw, part.lowerBound..<nameEnd, "timeout") else { return nil }
        var start = equals + 1
        var end = part.upperBound
        while start < end, raw[start] == 0x20 || raw[start] == 0x09 { start += 1 }
        if end - start >= 2, raw[start] == UInt8(ascii: "\""), raw[end - 1] == UInt8(ascii: "\"") {
            start += 1
            end -= 1
        }
        return length(raw, start..<end).map { min($0, 86_400) }
    }

    /// Each comma-separated part of `range`, its spaces and tabs trimmed; a part with no bytes
    /// between its commas is left out when `omittingEmpty` (one of only spaces is not).
    private static func forEachPart(
        _ raw: UnsafeRawBufferPointer, _ range: Range<Int>, omittingEmpty: Bool, _ body: (Range<Int>) -> Void
    ) {
        var start = range.lowerBound
        while true {
            var end = start
            while end < range.upperBound, raw[end] != UInt8(ascii: ",") { end += 1 }
            if !(omittingEmpty && end == start) {
                var from = start
                var to = end
                while from < to, raw[from] == 0x20 || raw[from] == 0x09 { from += 1 }
                while to > from, raw[to - 1] == 0x20 || raw[to - 1] == 0x09 { to -= 1 }
                body(from..<to)
            }
            guard end < range.upperBound else { return }
            start = end + 1
        }
    }

    /// A length of 1 to 18 digits.
    private static func length(_ raw: UnsafeRawBufferPointer, _ range: Range<Int>) -> Int? {
        guard !range.isEmpty, range.count <= 18 else { return nil }
        var value = 0
        for at in range {
            let digit = raw[at]
            guard digit >= 0x30, digit <= 0x39 else { return nil }
            value = value * 10 + Int(digit - 0x30)
        }
        return value
    }

    /// Whether the bytes in `range` are `lowercase`, an ASCII lowercase word, ignoring ASCII case.
    private static func equalsLowercase(_ raw: UnsafeRawBufferPointer, _ range: Range<Int>, _ lowercase: StaticString) -> Bool {
        guard range.count == lowercase.utf8CodeUnitCount else { return false }
        return lowercase.withUTF8Buffer { expected in
            var at = range.lowerBound
            for want in expected {
                let byte = raw[at]
                guard byte == want || byte | 0x20 == want && byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") else { return false }
                at += 1
            }
            return true
        }
    }

    /// A control byte other than a tab, which no status line or field value may hold.
    private static func isControl(_ byte: UInt8) -> Bool {
        (byte < 0x20 && byte != 0x09) || byte == 0x7F
    }

    /// RFC 9110 §5.6.2's tchar, as a bit per byte below 128.
    static func isTokenByte(_ byte: UInt8) -> Bool {
        let low: UInt64 = 0x03FF_6CFA_0000_0000  // ! # $ % & ' * + - . 0-9
        let high: UInt64 = 0x57FF_FFFF_C7FF_FFFE  // A-Z ^ _ ` a-z | ~
        return byte < 64 ? (low >> byte) & 1 == 1 : byte < 128 && (high >> (byte - 64)) & 1 == 1
    }
}
