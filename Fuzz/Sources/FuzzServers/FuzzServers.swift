import FuzzDriver
import Foundation
import PushFleetWire

/// Raw bytes to the servers: the reference backend and the mock push service run in this process
/// (started once, on loopback ports), and each input goes over a new connection to one of them.
/// The first byte picks the port, the rest is sent as it is, then the client half-closes and reads
/// until the server closes.
///
/// A finding is a crash; no close within ``Exchange/answerBound`` after the client stopped
/// sending, in each of ``Exchange/attempts`` tries; an answer on an HTTP/1.1 port that does not
/// start as an HTTP/1.1 response; or a 5xx that is not a failure on the server's side. The only
/// such failure here is a 507 for a full store. The backend's 500 `Abandoned` means the push
/// service failed every push, which it does not here (faults are reset after each input, and a
/// handle it refuses is removed instead), so it is a finding too.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzServers(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data, size > 0 else { return 0 }
    let servers = FuzzedServers.shared
    let port = FuzzedServers.Port.allCases[Int(data[0]) % FuzzedServers.Port.allCases.count]
    let (request, usedPlaceholder) = servers.request(from: UnsafeRawBufferPointer(start: data + 1, count: size - 1))
    var exchange = request.withUnsafeBytes { Exchange.run(port: servers.port(port), $0) }
    servers.reset(afterPlaceholder: usedPlaceholder)
    // A connection still open at the bound may be this process starved of the CPU (CI fuzzes
    // at nice 19 beside the suite); a server that hangs does so again.
    var attempts = 1
    while !exchange.closed, !exchange.failedToConnect, attempts < Exchange.attempts {
        exchange = request.withUnsafeBytes { Exchange.run(port: servers.port(port), $0) }
        servers.reset(afterPlaceholder: usedPlaceholder)
        attempts += 1
    }
    if let finding = exchange.finding(port: port) {
        let shown = String(decoding: exchange.answer.prefix(600), as: UTF8.self)
        fatalError("\(port): \(finding)\n--- answer (\(exchange.answer.count) bytes) ---\n\(shown)")
    }
    return 0
}

extension Exchange {
    /// What is wrong with the server's side of this exchange, if anything.
    func finding(port: FuzzedServers.Port) -> String? {
        if failedToConnect { return "the server does not accept connections" }
        if !closed {
            return "no close within \(Exchange.answerBound) s of the client's end of input, \(Exchange.attempts) times (answer so far shown)"
        }
        guard port != .pushHTTP2 else { return nil }
        guard answer.isEmpty || answer.starts(with: Array("HTTP/1.1 ".utf8)) else {
            return "the answer is not an HTTP/1.1 response"
        }
        for response in HTTPResponses.parse(answer) where response.status >= 500 {
            if response.status == 507 { continue }
            return "status \(response.status) for a request that is not a failure on the server's side"
        }
        return nil
    }
}

extension Array where Element == UInt8 {
    func contains(_ needle: [UInt8]) -> Bool {
        guard !needle.isEmpty, needle.count <= count else { return needle.isEmpty }
        return (0...(count - needle.count)).contains { self[$0..<($0 + needle.count)].elementsEqual(needle) }
    }
}

@main
enum FuzzServers {
    static func main() {
        FuzzDriver.main(fuzzServers)
    }
}
