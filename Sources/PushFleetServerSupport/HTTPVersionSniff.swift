/// Which HTTP a connection speaks, told from its first bytes.
///
/// ALPN alone does not decide it: some HTTP/2 clients offer no ALPN and send the HTTP/2 preface
/// straight after the handshake (aioapns does), which a real APNs host accepts. The preface is
/// 24 fixed bytes that no HTTP/1.1 request line starts with, so the first bytes decide.
public enum HTTPVersionSniff: Sendable, Equatable {
    case http1
    case http2
    /// The bytes so far are a prefix of the HTTP/2 preface: read more.
    case needMore

    /// The HTTP/2 client connection preface (RFC 9113 §3.4).
    public static let http2Preface: [UInt8] = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)

    public static func classify(_ bytes: some Collection<UInt8>) -> HTTPVersionSniff {
        var index = 0
        for byte in bytes {
            guard index < http2Preface.count else { break }
            if byte != http2Preface[index] { return .http1 }
            index += 1
        }
        return index == http2Preface.count ? .http2 : .needMore
    }
}
