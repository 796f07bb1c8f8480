import Foundation
import Hummingbird
import HummingbirdCore
import HummingbirdWebSocket
import Logging
import NIOCore
import NIOWebSocket
import PushFleetCore
import PushFleetServerSupport
import PushFleetWire
import ServiceLifecycle

/// The device side of the mock push service: WebSocket connections that devices hold, as phones
/// hold theirs to APNs or FCM.
///
/// `GET /device?platform=P&token=T` carries one device; `GET /gateway` carries any number, added
/// and removed with ``GatewayCommand`` frames. Pushes arrive as ``PushFrame`` text frames.
struct DeviceGateway {
    /// Largest client frame read; commands naming many devices fit easily.
    static let maxInboundMessage = 4 * 1024 * 1024

    let service: PushService

    /// Whether an upgrade is a device's (counted against the device cap), not a run's watch.
    static func isDevice(_ head: HTTPRequest) -> Bool {
        !(head.path.map { URI($0).path == GatewayFrame.observePath } ?? false)
    }

    /// Decides whether an HTTP request becomes a gateway connection. Requests that do not
    /// qualify fall through to the router, which explains what was wrong.
    func shouldUpgrade(_ head: HTTPRequest, channel: any Channel) -> ShouldUpgradeResult<WebSocketDataHandler<HTTP1WebSocketUpgradeChannel.Context>> {
        guard head.method == .get, let target = head.path else { return .dontUpgrade }
        let uri = URI(target)
        switch uri.path {
        case GatewayFrame.devicePath:
            guard let address = Self.address(from: uri) else { return .dontUpgrade }
            let acks = uri.queryParameters["ack"] == "1"
            return .upgrade([:]) { inbound, outbound, context in
                await run(.single(address), acks: acks, channel: channel, inbound: inbound, outbound: outbound, logger: context.logger)
            }
        case GatewayFrame.multiplexPath:
            return .upgrade([:]) { inbound, outbound, context in
                await run(.multiplexed, channel: channel, inbound: inbound, outbound: outbound, logger: context.logger)
            }
        case GatewayFrame.observePath:
            guard let run = uri.queryParameters["run"], ObserveEndpoint.isRunID(run) else { return .dontUpgrade }
            let endpoint = ObserveEndpoint(service: service)
            return .upgrade([:]) { inbound, outbound, context in
                await endpoint.run(String(run), inbound: inbound, outbound: outbound, logger: context.logger)
            }
        default:
            return .dontUpgrade
        }
    }

    /// Plain-HTTP answers on the gateway paths: a request that reached the router was not a
    /// valid upgrade.
    func register(on router: Router<BasicRequestContext>) {
        router.get(RouterPath(stringLiteral: GatewayFrame.devicePath)) { request, _ -> Response in
            if Self.address(from: request.uri) == nil {
                throw HTTPError(
                    .badRequest,
                    message: "platform (apns, fcm, wns or webpush) and a valid token are required: /device?platform=apns&token=<hex>"
                )
            }
            throw HTTPError(.upgradeRequired, message: "open a WebSocket on this path")
        }
        router.get(RouterPath(stringLiteral: GatewayFrame.multiplexPath)) { _, _ -> Response in
            throw HTTPError(.upgradeRequired, message: "open a WebSocket on this path")
        }
        router.get(RouterPath(stringLiteral: GatewayFrame.observePath)) { request, _ -> Response in
            guard let run = request.uri.queryParameters["run"], ObserveEndpoint.isRunID(run) else {
                throw HTTPError(.badRequest, message: "run (the run id: 4 to 64 letters and digits) is required: /observe?run=<run id>")
            }
            throw HTTPError(.upgradeRequired, message: "open a WebSocket on this path")
        }
    }

    static func address(from uri: URI) -> DeviceAddress? {
        let query = uri.queryParameters
        guard let platform = query["platform"].flatMap({ Platform(name: $0) }), Platform.pushable.contains(platform),
            let token = query["token"], TokenRules.isValid(token, for: platform)
        else { return nil }
        return DeviceAddress(platform: platform, token: TokenRules.normalized(token, for: platform))
    }

    private func run(
        _ mode: GatewayConnection.Mode,
        acks: Bool = false,
        channel: any Channel,
        inbound: WebSocketInboundStream,
        outbound: WebSocketOutboundWriter,
        logger: Logger
    ) async {
        let service = service
        let writer = GatewayConnection.Writer(channel: channel, now: service.now) { frame, instant in
            service.report(.written, of: frame, at: instant)
        }
        let connection = service.openConnection(mode: mode, acks: acks, writer: writer)
        if case .single(let address) = mode {
            // Held pushes go out first; the notice then confirms the device is online, and says
            // when its last connection was found gone (how long a dead link took to notice).
            let previous = service.attach([address], to: connection)
            connection.send(
                GatewayNotice(type: .subscribed, devices: [address], offlineSince: previous.offlineSince, tookOver: previous.tookOver ? true : nil)
            )
        }
        // On shutdown the service closes every device connection, as a real service going away would.
        await withGracefulShutdownHandler {
            await pump(connection, inbound: inbound, outbound: outbound, logger: logger)
        } onGracefulShutdown: {
            connection.close(reason: "shutting down")
        }
        service.closeConnection(connection)
    }

    private func pump(
        _ connection: GatewayConnection,
        inbound: WebSocketInboundStream,
        outbound: WebSocketOutboundWriter,
        logger: Logger
    ) async {
        await withTaskGroup(of: Void.self) { group in
            // Frames are written on the channel's loop (GatewayConnection); a close goes through
            // the WebSocket handler, after what was written before it.
            group.addTask {
                for await reason in connection.closeRequests {
                    try? await outbound.close(.goingAway, reason: reason)
                    return
                }
            }
            group.addTask {
                do {
                    for try await message in inbound.messages(maxSize: Self.maxInboundMessage) {
                        handle(message, on: connection)
                    }
                } catch {
                    logger.debug("gateway connection \(connection.id) ended: \(error)")
                }
            }
            // Whichever side ends first (client gone, or service closed it) ends the other.
            await group.next()
            group.cancelAll()
        }
    }

    private func handle(_ message: WebSocketMessage, on connection: GatewayConnection) {
        guard case .text(var text) = message,
            let command = text.withUTF8({ GatewayCommand(fastJSON: $0) })
                ?? (try? ServerJSON.decoder.decode(GatewayCommand.self, from: Data(text.utf8)))
        else {
            connection.send(GatewayNotice(type: .error, reason: "expected a JSON text frame {\"op\":…,\"devices\":[…]}"))
            return
        }
        if command.op == .ack {
            connection.acknowledged(command.pushes ?? [])
            return
        }
        var devices = (command.devices ?? []).map(TokenRules.normalized)
        if case .single(let own) = connection.mode {
            // A single-device connection speaks only for its own device.
            guard devices.allSatisfy({ $0 == own }) else {
                connection.send(GatewayNotice(type: .error, reason: "this connection carries \(own) only"))
                return
            }
            devices = [own]
        }
        let invalid = devices.filter { !Platform.pushable.contains($0.platform) || !TokenRules.isValid($0.token[...], for: $0.platform) }
        guard invalid.isEmpty else {
            connection.send(GatewayNotice(type: .error, devices: invalid, reason: "invalid platform or token"))
            return
        }
        switch command.op {
        case .subscribe:
            service.attach(devices, to: connection)
            connection.send(GatewayNotice(type: .subscribed, devices: devices))
        case .unsubscribe:
            service.detach(devices, from: connection)
            connection.send(GatewayNotice(type: .unsubscribed, devices: devices))
        case .unregister:
            service.unregister(devices)
            connection.send(GatewayNotice(type: .unregistered, devices: devices))
        case .ack:
            break
        }
    }
}
