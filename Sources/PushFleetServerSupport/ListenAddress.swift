import PushFleetCore

/// A `HOST:PORT` to listen on or connect to. IPv6 hosts are written in brackets: `[::1]:8080`.
public struct ListenAddress: Sendable, Equatable, CustomStringConvertible {
    public var host: String
    public var port: Int

    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    public struct ParseError: Error, CustomStringConvertible {
        public let text: String
        public var description: String {
            "'\(text)' is not HOST:PORT (e.g. 127.0.0.1:8080, [::1]:8080, or :0 for any free port on 127.0.0.1)"
        }
    }

    public init(parsing text: String) throws(ParseError) {
        guard let colon = text.lastIndex(of: ":") else { throw ParseError(text: text) }
        var host = String(text[..<colon])
        guard let port = Int(text[text.index(after: colon)...]), (0...65535).contains(port) else {
            throw ParseError(text: text)
        }
        if host.hasPrefix("[") && host.hasSuffix("]") {
            host = String(host.dropFirst().dropLast())
        } else if host.contains(":") {
            throw ParseError(text: text)
        }
        self.init(host: host.isEmpty ? "127.0.0.1" : host, port: port)
    }

    /// The address as a URL authority (IPv6 hosts bracketed).
    public var authority: String {
        host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
    }

    public var description: String { authority }

    /// `http://` plus the authority, for a server bound here.
    public var httpURL: String { "http://\(authority)" }

    /// Whether only this machine can reach the address.
    public var isLoopback: Bool { LoopbackHost.contains(host) }
}
