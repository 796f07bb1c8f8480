import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// One connection to a loopback port: write the request, half-close, read until the server
/// closes or ``answerBound`` passes. Blocking calls on the fuzzer's own thread; the servers run on
/// their event loops and Swift's pool.
struct Exchange {
    /// Seconds a server may take to answer and close once the client has sent everything. The
    /// slowest legitimate answer is a backend send retried against the push service (tens of ms).
    /// Replays run inside `swift test`, beside whole fleet runs on the same cores: they allow more.
    #if PUSHFLEET_FUZZ
    static let answerBound = 5
    #else
    static let answerBound = 20
    #endif
    /// Tries before a connection left open is a finding.
    static let attempts = 3
    /// The most seconds one try waits while this process is starved of the CPU (CI fuzzes at nice
    /// 19 beside the suite, where a process gets a few percent of a core): time in which its
    /// threads mostly waited for a CPU does not count toward ``answerBound``, up to this.
    static let starvedBound = 30
    /// The most answer bytes kept (a rich image is at most 2 MiB).
    static let answerLimit = 4 << 20

    var answer: [UInt8] = []
    var closed = false
    var failedToConnect = false

    static func run(port: Int, _ request: UnsafeRawBufferPointer) -> Exchange {
        var exchange = Exchange()
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else {
            exchange.failedToConnect = true
            return exchange
        }
        defer {
            // A reset rather than a FIN: the client's side leaves no TIME_WAIT behind, so a long run
            // does not run out of ephemeral ports.
            var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
            setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
            close(fd)
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            exchange.failedToConnect = true
            return exchange
        }
        var deadline = ContinuousClock.now + .seconds(answerBound)
        var timeout = timeval(tv_sec: answerBound, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var sent = 0
        while sent < request.count {
            let count = send(fd, request.baseAddress! + sent, request.count - sent, Int32(MSG_NOSIGNAL))
            // The server may close before reading everything (after answering 400, say).
            guard count > 0 else { break }
            sent += count
        }
        shutdown(fd, Int32(SHUT_WR))
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        let hardDeadline = ContinuousClock.now + .seconds(starvedBound)
        var looked = (at: ContinuousClock.now, delay: runDelay())
        while true {
            let remaining = deadline - ContinuousClock.now
            guard remaining > .zero else { break }
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&poller, 1, Int32(min(remaining / .milliseconds(1), 1000).rounded(.up)))
            // A hung server's threads sleep; a starved one's wait, runnable, for a CPU. Looked at
            // twice a second at most: an answer that comes at once reads /proc only at the start.
            let at = ContinuousClock.now
            if at - looked.at >= .milliseconds(500) {
                let now = (at: at, delay: runDelay())
                if let before = looked.delay, let after = now.delay {
                    let interval = now.at - looked.at
                    if Double(after - before) >= 0.5 * Double(interval / .nanoseconds(1)) {
                        deadline = min(deadline + interval, hardDeadline)
                    }
                }
                looked = now
            }
            if ready < 0 && errno == EINTR { continue }
            guard ready > 0 else { continue }
            let count = read(fd, &buffer, buffer.count)
            if count > 0 {
                if exchange.answer.count < answerLimit { exchange.answer += buffer[0..<count] }
            } else if count == 0 || errno != EINTR {
                // EOF, or a reset: either way the server let go of the connection.
                exchange.closed = true
                break
            }
        }
        return exchange
    }
}

extension Exchange {
    /// Nanoseconds this process's threads have spent runnable but waiting for a CPU (the second
    /// field of each thread's schedstat); nil where the kernel does not say.
    static func runDelay() -> Int64? {
        guard let threads = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task") else { return nil }
        var total: Int64 = 0
        for thread in threads {
            guard let text = try? String(contentsOfFile: "/proc/self/task/\(thread)/schedstat", encoding: .utf8) else { continue }
            let fields = text.split(separator: " ")
            guard fields.count >= 2, let delay = Int64(fields[1]) else { continue }
            total += delay
        }
        return total
    }
}

/// The HTTP/1.1 responses at the start of an answer, as far as they parse.
enum HTTPResponses {
    struct Response {
        var status: Int
        var body: ArraySlice<UInt8>
    }

    /// Stops at the first thing that is not a complete response, and after a 101 (what follows is
    /// another protocol).
    static func parse(_ bytes: [UInt8]) -> [Response] {
        var responses: [Response] = []
        var index = bytes.startIndex
        while index < bytes.endIndex, responses.count < 1000 {
            guard let headEnd = find([13, 10, 13, 10], in: bytes, from: index) else { break }
            let head = String(decoding: bytes[index..<headEnd], as: UTF8.self)
            let lines = head.split(separator: "\r\n", omittingEmptySubsequences: false)
            let statusLine = lines[0].split(separator: " ", maxSplits: 2)
            guard statusLine.count >= 2, statusLine[0] == "HTTP/1.1", let status = Int(statusLine[1]) else { break }
            var length: Int?
            var chunked = false
            for line in lines.dropFirst() {
                guard let colon = line.firstIndex(of: ":") else { continue }
                let name = line[..<colon].lowercased()
                let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
                if name == "content-length" { length = Int(value) }
                if name == "transfer-encoding" && value.lowercased().contains("chunked") { chunked = true }
            }
            let bodyStart = headEnd + 4
            if status == 101 {
                responses.append(Response(status: status, body: []))
                break
            }
            if (100..<200).contains(status) || status == 204 || status == 304 {
                responses.append(Response(status: status, body: []))
                index = bodyStart
            } else if chunked {
                guard let (body, end) = dechunk(bytes, from: bodyStart) else {
                    responses.append(Response(status: status, body: bytes[bodyStart...]))
                    break
                }
                responses.append(Response(status: status, body: body[...]))
                index = end
            } else if let length, length >= 0, bodyStart + length <= bytes.endIndex {
                responses.append(Response(status: status, body: bytes[bodyStart..<(bodyStart + length)]))
                index = bodyStart + length
            } else {
                // No length, or cut short (an answer to HEAD): the rest is this response's.
                responses.append(Response(status: status, body: bytes[min(bodyStart, bytes.endIndex)...]))
                break
            }
        }
        return responses
    }

    private static func dechunk(_ bytes: [UInt8], from start: Int) -> ([UInt8], Int)? {
        var body: [UInt8] = []
        var index = start
        while true {
            guard let lineEnd = find([13, 10], in: bytes, from: index) else { return nil }
            let sizeText = String(decoding: bytes[index..<lineEnd], as: UTF8.self).split(separator: ";").first ?? ""
            guard let size = Int(sizeText.trimmingCharacters(in: .whitespaces), radix: 16), size >= 0 else { return nil }
            let dataStart = lineEnd + 2
            if size == 0 {
                guard let end = find([13, 10, 13, 10], in: bytes, from: lineEnd) else { return nil }
                return (body, end + 4)
            }
            guard dataStart + size + 2 <= bytes.endIndex else { return nil }
            body += bytes[dataStart..<(dataStart + size)]
            index = dataStart + size + 2
        }
    }

    static func find(_ needle: [UInt8], in bytes: [UInt8], from start: Int) -> Int? {
        guard needle.count <= bytes.count, start <= bytes.count - needle.count else { return nil }
        for position in start...(bytes.count - needle.count) where bytes[position..<(position + needle.count)].elementsEqual(needle) {
            return position
        }
        return nil
    }
}
