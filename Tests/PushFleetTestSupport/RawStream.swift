import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
package import NIOSSL

/// Raw bytes to a loopback port, plain or over TLS, written part by part with a delay before
/// each, while whatever the server sends is kept as it arrives: for clients that trickle,
/// stall or flood, and for reading HTTP/2 frames back.
package enum RawStream {
    package struct Outcome: Sendable {
        /// Every byte the server sent.
        package var bytes: [UInt8]
        /// Seconds from the connect until the server closed; nil if it did not within the wait.
        package var closedAfter: Double?
        /// Seconds from the connect until the first byte came; nil if none did.
        package var firstByteAfter: Double? { arrivals.first?.at }
        /// When each read arrived, and the length of ``bytes`` after it.
        package var arrivals: [(at: Double, end: Int)]
        package var text: String { String(decoding: bytes, as: UTF8.self) }

        /// Seconds from the connect until the byte at `offset` came.
        package func seconds(untilByte offset: Int) -> Double? {
            arrivals.first { $0.end > offset }?.at
        }
    }

    package struct TLS: Sendable {
        package var configuration: TLSConfiguration
        package var serverName: String
        package var alpn: [String]

        package init(configuration: TLSConfiguration, serverName: String, alpn: [String]) {
            self.configuration = configuration
            self.serverName = serverName
            self.alpn = alpn
        }
    }

    /// Connects, writes `parts` (stopping once the server has closed), and keeps reading until
    /// the server closes, what it sent satisfies `until`, or `wait` has passed since the connect;
    /// then closes.
    package static func run(
        port: Int, tls: TLS? = nil, _ parts: [(delay: Duration, bytes: [UInt8])], wait: Duration,
        until: (@Sendable ([UInt8]) -> Bool)? = nil
    ) async throws -> Outcome {
        let context = try tls.map { tls in
            var configuration = tls.configuration
            configuration.applicationProtocols = tls.alpn
            return try NIOSSLContext(configuration: configuration)
        }
        let start = ContinuousClock.now
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connect(host: "127.0.0.1", port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    if let context, let tls {
                        try channel.pipeline.syncOperations.addHandler(NIOSSLClientHandler(context: context, serverHostname: tls.serverName))
                    }
                    return try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                }
            }
        let seconds: @Sendable () -> Double = {
            let elapsed = ContinuousClock.now - start
            return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        }
        return try await channel.executeThenClose { inbound, outbound in
            let received = NIOLockedValueBox<(bytes: [UInt8], arrivals: [(at: Double, end: Int)], closed: Double?)>(([], [], nil))
            await withTaskGroup(of: Bool.self) { group in
                group.addTask {
                    do {
                        for try await buffer in inbound {
                            let bytes = received.withLockedValue { state in
                                state.bytes += buffer.readableBytesView
                                state.arrivals.append((seconds(), state.bytes.count))
                                return state.bytes
                            }
                            if let until, until(bytes) { return true }
                        }
                    } catch {
                        // A reset: the server is done with the connection too.
                    }
                    // Ended by the wait running out (a cancel) is not a close by the server.
                    if !Task.isCancelled { received.withLockedValue { $0.closed = seconds() } }
                    return true
                }
                group.addTask {
                    for part in parts {
                        if part.delay > .zero { try? await Task.sleep(for: part.delay) }
                        if received.withLockedValue({ $0.closed != nil }) || Task.isCancelled { return false }
                        do { try await outbound.write(ByteBuffer(bytes: part.bytes)) } catch { return false }
                    }
                    return false
                }
                group.addTask {
                    try? await Task.sleep(for: wait)
                    return true
                }
                // Done when the server closes or the wait runs out, whichever is first.
                while let finished = await group.next(), !finished {}
                group.cancelAll()
            }
            let state = received.withLockedValue { $0 }
            return Outcome(bytes: state.bytes, closedAfter: state.closed, arrivals: state.arrivals)
        }
    }
}
