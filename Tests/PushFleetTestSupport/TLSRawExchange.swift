import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
package import NIOSSL

/// Raw bytes over a TLS connection: the handshake with the given ALPN offer, then `bytes`, then
/// whatever the server sends until it closes or `wait` passes (then the client closes, keeping
/// what arrived: keep-alive answers do not close).
package enum TLSRawExchange {
    package struct Outcome {
        package var answer: [UInt8]
        /// The server closed (or refused the handshake) within `wait`.
        package var closed: Bool
    }

    package static func run(port: Int, tls base: TLSConfiguration, serverName: String, alpn: [String], bytes: [UInt8], wait: Duration) async throws -> Outcome {
        var tls = base
        tls.applicationProtocols = alpn
        let context = try NIOSSLContext(configuration: tls)
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connect(host: "127.0.0.1", port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLClientHandler(context: context, serverHostname: serverName))
                    return try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                }
            }
        return try await channel.executeThenClose { inbound, outbound in
            try? await outbound.write(ByteBuffer(bytes: bytes))
            let answer = NIOLockedValueBox<[UInt8]>([])
            let closed = await withTaskGroup(of: Bool.self) { group in
                group.addTask {
                    do {
                        for try await buffer in inbound { answer.withLockedValue { $0 += buffer.readableBytesView } }
                    } catch {
                        // A refused handshake or a reset: the server is done with the connection.
                    }
                    return true
                }
                group.addTask {
                    try? await Task.sleep(for: wait)
                    return false
                }
                let first = await group.next()!
                group.cancelAll()
                return first
            }
            return Outcome(answer: answer.withLockedValue { $0 }, closed: closed)
        }
    }
}
