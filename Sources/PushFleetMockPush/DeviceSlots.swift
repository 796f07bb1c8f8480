import Foundation
import Logging
import NIOCore
import NIOHTTP1
import PushFleetCore
import PushFleetServerSupport
import Synchronization

/// One gateway port's ``DeviceCap`` at work: admits device upgrades and frees their place when
/// the connection closes, answers a refused upgrade 503 at once and closes it, and logs each
/// episode at the cap once.
final class DeviceSlots: Sendable {
    /// The port, as the log names it.
    let port: String
    private let state: Mutex<DeviceCap>

    init(cap: Int, port: String) {
        self.port = port
        self.state = Mutex(DeviceCap(cap: cap))
    }

    var cap: Int { state.withLock { $0.cap } }
    var snapshot: DeviceCap { state.withLock { $0 } }

    /// What a refused device is told (and how a run names it).
    static func reason(cap: Int) -> String {
        "push service at its connection cap of \(cap.grouped) devices"
    }


    /// Takes a place for the device upgrading on `channel` until the channel closes. False when
    /// none is left: the device has then been answered 503 and the connection is closing.
    /// Called on the channel's event loop while the upgrade is decided.
    func admit(_ channel: any Channel, logger: Logger) -> Bool {
        switch state.withLock({ $0.admit() }) {
        case .admit:
            channel.closeFuture.whenComplete { _ in self.release(logger: logger) }
            return true
        case .refuse(let startsEpisode):
            if startsEpisode {
                logger.warning(
                    "\(Self.reason(cap: cap)) on \(port): refusing device sockets with 503; provider and admin connections keep the rest of the port's connections"
                )
            }
            refuse(channel)
            return false
        }
    }

    private func release(logger: Logger) {
        guard case .episodeEnded(let count) = state.withLock({ $0.release() }) else { return }
        logger.notice("device sockets on \(port) below the cap of \(cap.grouped) again; \(count.grouped) refused while at it")
    }

    /// Writes the 503 straight to the HTTP encoder and closes. It cannot go through the router:
    /// once an upgrade request is declined, the HTTP/1.1 parser refuses the rest of the
    /// connection, so the router would never see it (the client would get a bare 400).
    private func refuse(_ channel: any Channel) {
        let cap = self.cap
        let body = (try? ServerJSON.encoder.encode(Refusal(reason: "AtCapacity", message: Self.reason(cap: cap), cap: cap))) ?? Data()
        let headers = HTTPHeaders([
            ("Content-Type", "application/json"), ("Content-Length", String(body.count)), ("Connection", "close"), ("Retry-After", "5"),
        ])
        channel.write(HTTPServerResponsePart.head(HTTPResponseHead(version: .http1_1, status: .serviceUnavailable, headers: headers)), promise: nil)
        channel.write(HTTPServerResponsePart.body(.byteBuffer(ByteBuffer(bytes: body))), promise: nil)
        channel.writeAndFlush(HTTPServerResponsePart.end(nil)).whenComplete { _ in channel.close(promise: nil) }
    }

    /// The body of a 503 for a device past the cap.
    struct Refusal: Codable, Equatable {
        var reason: String
        var message: String
        var cap: Int
    }
}
