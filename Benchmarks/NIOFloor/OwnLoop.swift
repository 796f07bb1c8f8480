#if canImport(Glibc)
import CEpoll
import Foundation
import Glibc

/// HTTP/1.1 answered by a loop of its own: one thread, `epoll`, nonblocking sockets, each request
/// framed as ``H1BytesAnswer`` frames it and answered with the same constant bytes, all of a
/// wake-up's answers to a connection in one `write`. Beside ``H1BytesAnswer`` it measures what
/// NIO's channel, pipeline, promises and buffers add per request over the system calls every
/// server makes (docs/performance-push.md, "NIO's channel beside a loop of its own").
/// A measurement only: no limits, no timeouts; a connection whose answers cannot all be written
/// at once, or whose head cannot be read, is closed.
enum OwnLoop {
    /// Listens on `port` and answers on a thread of its own, so that the loop's CPU is its alone
    /// and NIO's loops stay idle.
    static func serve(port: Int) throws {
        let listener = c_listen_loopback(Int32(port))
        guard listener >= 0 else { throw Failure("listen on \(port)") }
        let poll = epoll_create1(0)
        guard poll >= 0 else { throw Failure("epoll_create1") }
        guard c_epoll_add_readable(poll, listener) == 0 else { throw Failure("epoll_ctl") }
        Thread.detachNewThread { run(poll: poll, listener: listener) }
    }

    private static func run(poll: Int32, listener: Int32) {
        var events = [epoll_event](repeating: epoll_event(), count: 64)
        var pending: [Int32: [UInt8]] = [:]
        var input = [UInt8](repeating: 0, count: 65_536)
        var output: [UInt8] = []
        while true {
            let ready = epoll_wait(poll, &events, Int32(events.count), -1)
            guard ready > 0 else { continue }
            for event in events[0..<Int(ready)] {
                let fd = event.data.fd
                if fd == listener {
                    while case let accepted = c_accept_nonblocking(listener), accepted >= 0 {
                        var one: Int32 = 1
                        setsockopt(accepted, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
                        if c_epoll_add_readable(poll, accepted) != 0 { close(accepted) }
                    }
                    continue
                }
                let count = input.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                guard count > 0 else {
                    if count == 0 || errno != EAGAIN { close(fd); pending[fd] = nil }
                    continue
                }
                var bytes = pending.removeValue(forKey: fd) ?? []
                bytes.append(contentsOf: input[0..<count])
                let complete = bytes.withUnsafeBytes { raw -> Int? in
                    var offset = 0
                    while let length = H1Request.length(raw[offset...]) {
                        guard length > 0 else { return nil }
                        offset += length
                        output.append(contentsOf: H1Request.answer)
                    }
                    return offset
                }
                defer { output.removeAll(keepingCapacity: true) }
                guard let complete else {
                    close(fd)
                    continue
                }
                if complete < bytes.count { pending[fd] = Array(bytes[complete...]) }
                guard !output.isEmpty else { continue }
                let written = output.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
                if written != output.count {
                    close(fd)
                    pending[fd] = nil
                }
            }
        }
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
        init(_ call: String) { description = "own loop: \(call) failed, errno \(errno)" }
    }
}
#endif
