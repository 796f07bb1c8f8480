import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Writes raw bytes to a loopback port and closes: for malformed-protocol tests that no HTTP
/// client library will produce.
package enum RawSocket {
    package struct Failure: Error {}

    /// A loopback port held bound but not listening: connecting to it is refused, and no other
    /// socket can take it until `close()`.
    package struct Reserved {
        package let fd: Int32
        package let port: Int
        package func close() { _ = Glibc.close(fd) }
    }

    package static func boundNotListening() -> Reserved? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard bound else {
            _ = Glibc.close(fd)
            return nil
        }
        return Reserved(fd: fd, port: Int(UInt16(bigEndian: address.sin_port)))
    }

    /// A loopback port free when asked, for a server told its port before it starts.
    package static func freePort() throws -> Int {
        guard let reserved = boundNotListening() else { throw Failure() }
        reserved.close()
        return reserved.port
    }

    package static func send(_ text: String, port: Int) async throws {
        try await offPool { try sendBlocking(text, port: port) }
    }

    private static func sendBlocking(_ text: String, port: Int) throws {
        let fd = try connected(port: port)
        defer { close(fd) }
        _ = text.withCString { write(fd, $0, strlen($0)) }
        // Read whatever the server answers (an error page or a close) before closing.
        var buffer = [UInt8](repeating: 0, count: 4096)
        var timeout = timeval(tv_sec: 1, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        _ = read(fd, &buffer, buffer.count)
    }

    package struct Exchange {
        package var response: String
        /// The server closed the connection (EOF or reset) before `waitFor` ran out.
        package var closed: Bool
        package var seconds: Double
    }

    /// Connects, writes each part after its delay, then reads until the server closes or `waitFor`
    /// runs out. Blocking calls run on a thread of their own.
    /// With `endingInput`, the writing side is shut down after the last part (a half-close).
    package static func exchange(
        port: Int, _ parts: [(delay: Duration, bytes: [UInt8])], endingInput: Bool = false, waitFor: Duration = .seconds(5)
    ) async throws -> Exchange {
        try await offPool { try exchangeBlocking(port: port, parts, endingInput: endingInput, waitFor: waitFor) }
    }

    package static func exchange(port: Int, _ text: String, waitFor: Duration = .seconds(5)) async throws -> Exchange {
        try await exchange(port: port, [(.zero, Array(text.utf8))], waitFor: waitFor)
    }

    /// Opens a connection and leaves it idle; the caller closes the descriptor.
    package static func openIdle(port: Int) throws -> Int32 {
        try connected(port: port)
    }

    package static func closeIdle(_ fd: Int32) {
        close(fd)
    }

    private static func connected(port: Int) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure() }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard result == 0 else {
            close(fd)
            throw Failure()
        }
        return fd
    }

    private static func exchangeBlocking(
        port: Int, _ parts: [(delay: Duration, bytes: [UInt8])], endingInput: Bool, waitFor: Duration
    ) throws -> Exchange {
        let fd = try connected(port: port)
        defer { close(fd) }
        let start = Date()
        var closed = false
        for part in parts {
            if part.delay > .zero { Thread.sleep(forTimeInterval: Double(part.delay.components.seconds) + Double(part.delay.components.attoseconds) / 1e18) }
            let written = part.bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if written < 0 {
                closed = true
                break
            }
        }
        if endingInput, !closed { shutdown(fd, Int32(SHUT_WR)) }
        var timeout = timeval(tv_sec: 0, tv_usec: 100_000)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var response: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        let limit = Double(waitFor.components.seconds) + Double(waitFor.components.attoseconds) / 1e18
        while !closed && Date().timeIntervalSince(start) < limit {
            let count = read(fd, &buffer, buffer.count)
            if count > 0 {
                response += buffer[0..<count]
            } else if count == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                // A signal to the process (the suite sends itself some) interrupts a read; it is
                // no close.
                closed = true
            }
        }
        return Exchange(response: String(decoding: response, as: UTF8.self), closed: closed, seconds: Date().timeIntervalSince(start))
    }
}
