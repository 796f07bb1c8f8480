import Foundation
import HTTPTypes
import HummingbirdCore
import Logging
import NIOCore
import PushFleetServerSupport
import Synchronization

/// One gateway port's ``DeviceCap`` at work: admits device upgrades and frees their place when
/// the connection closes, answers a refused upgrade 503 at once and closes it, and logs each
/// episode at the cap once.
final class DeviceSlots: Sendable {
    /// The port, as the log names it.
    let port: String
    private let state: Mutex<DeviceCap>
    /// Connections whose upgrade was refused, until their 503 is written.
    private let refused = Mutex<Set<ObjectIdentifier>>([])

    init(cap: Int, port: String) {
        self.port = port
        self.state = Mutex(DeviceCap(cap: cap))
    }

    var cap: Int { state.withLock { $0.cap } }
    var snapshot: DeviceCap { state.withLock { $0 } }

    /// What a refused device is told (and how a run names it).
    static func reason(cap: Int) -> String {
        "push service at its connection cap of \(cap.formatted(.number.locale(Locale(identifier: "en_US")))) devices"
    }

    /// Takes a place for the device upgrading on `channel` until the channel closes; false when
    /// none is left (the request is then answered by ``answeringRefusals(_:)``).
    func admit(_ channel: any Channel, logger: Logger) -> Bool {
        switch state.withLock({ $0.admit() }) {
        case .admit:
            channel.closeFuture.whenComplete { _ in self.release(logger: logger) }
            return true
        case .refuse(let startsEpisode):
            let key = ObjectIdentifier(channel)
            refused.withLock { _ = $0.insert(key) }
            channel.closeFuture.whenComplete { _ in _ = self.refused.withLock { $0.remove(key) } }
            if startsEpisode {
                logger.warning(
                    "\(Self.reason(cap: cap)) on \(port): refusing device sockets with 503; provider and admin connections keep the rest of the port's connections"
                )
            }
            return false
        }
    }

    private func release(logger: Logger) {
        guard case .episodeEnded(let count) = state.withLock({ $0.release() }) else { return }
        logger.notice("device sockets on \(port) below the cap of \(cap) again; \(count) refused while at it")
    }

    /// `responder`, except that a connection whose device upgrade was refused gets a 503 naming
    /// the cap and is closed (a refused device must not keep holding a place).
    func answeringRefusals(_ responder: @escaping HTTPChannelHandler.Responder) -> HTTPChannelHandler.Responder {
        { request, writer, channel in
            let key = ObjectIdentifier(channel)
            guard self.refused.withLock({ $0.remove(key) }) != nil else {
                return try await responder(request, writer, channel)
            }
            let cap = self.cap
            let body = (try? ServerJSON.encoder.encode(Refusal(reason: "AtCapacity", message: Self.reason(cap: cap), cap: cap))) ?? Data()
            var head = HTTPResponse(status: .serviceUnavailable)
            head.headerFields[.contentType] = "application/json"
            head.headerFields[.contentLength] = String(body.count)
            head.headerFields[.connection] = "close"
            head.headerFields[.retryAfter] = "5"
            defer { channel.close(promise: nil) }
            try await writer.write(response: head, body: .init(byteBuffer: ByteBuffer(bytes: body)))
        }
    }

    /// The body of a 503 for a device past the cap.
    struct Refusal: Codable, Equatable {
        var reason: String
        var message: String
        var cap: Int
    }
}
