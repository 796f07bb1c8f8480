import PushFleetCore

/// Follows the framing of the HTTP/1.1 requests in a connection's raw bytes (heads,
/// `Content-Length` bodies, chunks), to refuse a chunk declared larger than the body cap when
/// its size line arrives, before any of it is read: the HTTP parser reports a chunk's size to
/// nobody, only its bytes as they come.
///
/// It is lenient and only looks: whatever it does not follow (the HTTP/2 preface, a request
/// asking to upgrade, bytes the parser will refuse) turns it off for the connection, and the
/// parser decides.
public struct RequestFramingState: Sendable, Equatable {
    enum Phase: Sendable, Equatable {
        case head
        case body(remaining: Int)
        case chunkSize(value: Int, digits: Int, extensions: Bool)
        case chunkData(remaining: Int)
        case chunkEnd(remaining: Int)
        case trailers
        case off
    }

    public enum Verdict: Sendable, Equatable {
        case pass
        /// A chunk over the cap is declared: pass on only the first `prefix` bytes of this read
        /// (those before the chunk's size line), and refuse the request.
        case tooLarge(prefix: Int)
    }

    var phase = Phase.head
    let maxBodySize: Int
    /// The current head line's first bytes, lowercased; enough for the headers looked at.
    var line: [UInt8] = []
    var firstLine = true
    var contentLength: Int?
    var chunked = false
    var upgrade = false
    static let kept = 64

    /// Smaller caps of known routes (``ServerLimits/routeBodyLimits``).
    let routes: [RouteBodyLimit]
    /// The cap of the request being read: its route's, else the port's.
    var requestMax: Int

    public init(maxBodySize: Int, routes: [RouteBodyLimit] = []) {
        self.maxBodySize = maxBodySize
        self.routes = routes
        self.requestMax = maxBodySize
    }

    public var isOff: Bool { phase == .off }

    public mutating func received(_ bytes: [UInt8]) -> Verdict {
        bytes.withUnsafeBytes { received($0) }
    }

    public mutating func received(_ bytes: UnsafeRawBufferPointer) -> Verdict {
        var index = 0
        var lineStart = 0
        while index < bytes.count {
            let byte = bytes[index]
            switch phase {
            case .off:
                return .pass
            case .head, .trailers:
                headByte(byte)
                if case .chunkSize = phase { lineStart = index + 1 }
            case .body(let remaining):
                // Body bytes are skipped in bulk.
                let take = min(remaining, bytes.count - index)
                phase = remaining > take ? .body(remaining: remaining - take) : .head
                index += take
                continue
            case .chunkSize(let value, let digits, let extensions):
                if byte == 0x0A {
                    phase = value == 0 ? .trailers : .chunkData(remaining: value)
                } else if extensions || byte == 0x0D {
                    break
                } else if byte == 0x3B || byte == 0x20 || byte == 0x09 {
                    phase = .chunkSize(value: value, digits: digits, extensions: true)
                } else if let digit = Self.hex(byte) {
                    let (times, overflow) = value.multipliedReportingOverflow(by: 16)
                    if overflow || times + digit > requestMax { return .tooLarge(prefix: lineStart) }
                    phase = .chunkSize(value: times + digit, digits: digits + 1, extensions: false)
                } else {
                    phase = .off
                }
            case .chunkData(let remaining):
                let take = min(remaining, bytes.count - index)
                phase = remaining > take ? .chunkData(remaining: remaining - take) : .chunkEnd(remaining: 2)
                index += take
                continue
            case .chunkEnd(let remaining):
                if remaining > 1 {
                    phase = .chunkEnd(remaining: 1)
                } else {
                    phase = .chunkSize(value: 0, digits: 0, extensions: false)
                    lineStart = index + 1
                }
            }
            index += 1
        }
        return .pass
    }

    private static let http2Preface = Array("pri * http/2.0".utf8)
    private static let contentLengthName = Array("content-length".utf8)
    private static let transferEncodingName = Array("transfer-encoding".utf8)
    private static let upgradeName = Array("upgrade".utf8)

    /// Every byte of every head passes here: lines are compared as bytes, and only the value
    /// of a header it acts on becomes a string.
    private mutating func headByte(_ byte: UInt8) {
        guard byte == 0x0A else {
            if byte != 0x0D, line.count < Self.kept { line.append(byte >= 0x41 && byte <= 0x5A ? byte + 0x20 : byte) }
            return
        }
        defer { line.removeAll(keepingCapacity: true) }
        if line.isEmpty {
            endOfHead()
            return
        }
        guard case .head = phase else { return }
        if firstLine {
            firstLine = false
            if line.starts(with: Self.http2Preface) { phase = .off }
            requestMax = routes.isEmpty ? maxBodySize : Self.routeMax(line: line, routes: routes, port: maxBodySize)
            return
        }
        guard let colon = line.firstIndex(of: 0x3A) else { return }
        let name = Self.trimmed(line[..<colon])
        if name.elementsEqual(Self.contentLengthName) {
            guard let length = Int(String(decoding: Self.trimmed(line[(colon + 1)...]), as: UTF8.self)), length >= 0 else {
                phase = .off
                return
            }
            contentLength = length
        } else if name.elementsEqual(Self.transferEncodingName) {
            if String(decoding: line[(colon + 1)...], as: UTF8.self).contains("chunked") { chunked = true }
        } else if name.elementsEqual(Self.upgradeName) {
            upgrade = true
        }
    }

    /// Without the spaces and tabs around it.
    private static func trimmed(_ bytes: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        var bytes = bytes
        while let first = bytes.first, first == 0x20 || first == 0x09 { bytes.removeFirst() }
        while let last = bytes.last, last == 0x20 || last == 0x09 { bytes.removeLast() }
        return bytes
    }

    /// The cap a request line's route has (the line as kept: its first bytes, lowercased).
    private static func routeMax(line: [UInt8], routes: [RouteBodyLimit], port: Int) -> Int {
        guard let space = line.firstIndex(of: 0x20) else { return port }
        return RouteBodyLimit.cap(routes, method: line[..<space], target: line[(space + 1)...], port: port)
    }

    private mutating func endOfHead() {
        if case .trailers = phase {
            phase = .head
        } else if firstLine {
            // Blank lines before a request line are skipped (RFC 9112 §2.2).
            return
        } else if upgrade {
            phase = .off
        } else if chunked {
            phase = .chunkSize(value: 0, digits: 0, extensions: false)
        } else if let contentLength, contentLength > 0 {
            phase = .body(remaining: contentLength)
        } else {
            phase = .head
        }
        firstLine = true
        contentLength = nil
        chunked = false
    }

    private static func hex(_ byte: UInt8) -> Int? {
        Hex.value(byte).map(Int.init)
    }
}
