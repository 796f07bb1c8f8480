import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Writes raw bytes to a loopback port and closes: for malformed-protocol tests that no HTTP
/// client library will produce.
enum RawSocket {
    struct Failure: Error {}

    static func send(_ text: String, port: Int) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure() }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { throw Failure() }
        _ = text.withCString { write(fd, $0, strlen($0)) }
        // Read whatever the server answers (an error page or a close) before closing.
        var buffer = [UInt8](repeating: 0, count: 4096)
        var timeout = timeval(tv_sec: 1, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        _ = read(fd, &buffer, buffer.count)
    }
}
