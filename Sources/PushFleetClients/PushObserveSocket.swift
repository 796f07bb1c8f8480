import Foundation
import HummingbirdWSClient
package import NIOCore
package import Logging
package import PushFleetCore

/// The push service's `/observe` WebSocket: the reports of one run's pushes, in batches.
package struct PushObserveSocket: Sendable {
    /// A batch holds at most a few thousand reports of a few hundred bytes each.
    static let maxFrame = 16 << 20

    private let inbound: WebSocketInboundStream

    /// Connects to `url` (`ws://…/observe?run=…`) on `loop` and runs `session` while the
    /// connection is open; the connection closes when `session` returns or throws, and its error
    /// is rethrown.
    package static func connect(
        url: String, on loop: any EventLoop, logger: Logger, _ session: @escaping @Sendable (PushObserveSocket) async throws -> Void
    ) async throws {
        try await WebSocketClient.connect(url: url, configuration: .init(maxFrameSize: maxFrame), eventLoopGroup: loop, logger: logger) {
            inbound, _, _ in
            try await session(PushObserveSocket(inbound: inbound))
        }
    }

    /// The service's reports until the connection closes; a frame that is not a report is skipped.
    package var reports: Reports { Reports(messages: inbound.messages(maxSize: Self.maxFrame)) }

    package struct Reports: AsyncSequence {
        let messages: WebSocketInboundMessageStream

        package func makeAsyncIterator() -> Iterator { Iterator(base: messages.makeAsyncIterator()) }

        package struct Iterator: AsyncIteratorProtocol {
            var base: WebSocketInboundMessageStream.AsyncIterator
            let decoder = JSONDecoder()

            package mutating func next() async throws -> PushReport? {
                while let message = try await base.next() {
                    guard case .text(var text) = message else { continue }
                    if let report = text.withUTF8({ PushReport(fastJSON: $0) }) { return report }
                    if let report = try? decoder.decode(PushReport.self, from: Data(text.utf8)) { return report }
                }
                return nil
            }
        }
    }
}
