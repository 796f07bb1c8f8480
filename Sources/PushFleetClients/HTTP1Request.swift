package import NIOCore
package import NIOHTTP1

/// A request as the bytes it goes out as (RFC 9112), made once before a connection is taken, so
/// a request that cannot be written fails without touching one, and a repeat on a new connection
/// writes the same bytes.
package struct HTTP1Request: Sendable {
    package let bytes: ByteBuffer
    /// Whether the answer has a body to read (not for HEAD).
    package let expectsBody: Bool

    /// The request line, `Host`, the headers given and the framing. The body's framing is the
    /// client's: a `Content-Length` or `Transfer-Encoding` among `headers` is left out, and the
    /// body's length is written instead.
    package init(
        method: HTTPMethod, target: String, host: String, headers: [(String, String)], body: ByteBuffer?
    ) throws(FleetHTTPError) {
        let methodName = method.rawValue
        guard !methodName.isEmpty, Self.every(methodName, HTTP1ResponseParser.isTokenByte) else {
            throw .invalidRequest("method is not a token")
        }
        // The target goes on the wire as it is: no spaces or control bytes.
        guard !target.isEmpty, Self.every(target, { $0 > 0x20 && $0 != 0x7F }) else {
            throw .invalidRequest("request target has a space or a control character")
        }
        var size = methodName.utf8.count + target.utf8.count + host.utf8.count + 40 + (body?.readableBytes ?? 0)
        for (name, value) in headers {
            guard !name.isEmpty, Self.every(name, HTTP1ResponseParser.isTokenByte) else {
                throw .invalidRequest("header name is not a token")
            }
            // A CR or LF would start a header or a request of its own.
            guard Self.every(value, { $0 >= 0x20 && $0 != 0x7F || $0 == 0x09 || $0 >= 0x80 }) else {
                throw .invalidRequest("header \(name) has a control character")
            }
            size += name.utf8.count + value.utf8.count + 4
        }
        var out = ByteBufferAllocator().buffer(capacity: size)
        out.writeString(methodName)
        out.writeStaticString(" ")
        out.writeString(target)
        out.writeStaticString(" HTTP/1.1\r\nHost: ")
        out.writeString(host)
        out.writeStaticString("\r\n")
        for (name, value) in headers where !Self.isFraming(name) {
            out.writeString(name)
            out.writeStaticString(": ")
            out.writeString(value)
            out.writeStaticString("\r\n")
        }
        if let body {
            out.writeStaticString("Content-Length: ")
            out.writeString(String(body.readableBytes))
            out.writeStaticString("\r\n\r\n")
            out.writeImmutableBuffer(body)
        } else if method != .GET && method != .HEAD && method != .DELETE {
            out.writeStaticString("Content-Length: 0\r\n\r\n")
        } else {
            out.writeStaticString("\r\n")
        }
        self.bytes = out
        self.expectsBody = method != .HEAD
    }

    /// Every byte of `text` passes: read on its contiguous UTF-8 (every native string's), where a
    /// walk of the UTF-8 view costs more than the rest of the request per push.
    private static func every(_ text: String, _ test: (UInt8) -> Bool) -> Bool {
        var text = text
        return text.withUTF8 { $0.allSatisfy(test) }
    }

    private static func isFraming(_ name: String) -> Bool {
        name.equalsLowercase("content-length") || name.equalsLowercase("transfer-encoding")
    }
}
