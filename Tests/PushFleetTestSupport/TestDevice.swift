import Foundation
package import NIOSSL
import HummingbirdWSClient
import Logging
package import PushFleetCore
import PushFleetServerSupport
package import PushFleetWire
import Synchronization

/// A device (or a multiplexing client) holding a real WebSocket to the mock push service's
/// gateway, recording every frame it receives.
package final class TestDevice: Sendable {
    package let address: DeviceAddress?
    private let frames = Mutex<[String]>([])
    private let isClosed = Mutex(false)
    /// Why the WebSocket ended, when it ended with an error.
    private let failure = Mutex<String?>(nil)
    private let writer = Readiness<WebSocketOutboundWriter>()
    private let task = Mutex<Task<Void, Never>?>(nil)

    private init(address: DeviceAddress?) {
        self.address = address
    }

    package static func randomToken(for platform: Platform) -> String {
        switch platform {
        case .apns: (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
        case .fcm: "fcm-" + UUID().uuidString
        case .wns, .mpns: "wns-" + UUID().uuidString
        case .webpush: "wp" + UUID().uuidString.replacingOccurrences(of: "-", with: "")
        }
    }

    /// Connects one device on `/device` and waits until the gateway confirms it online (over
    /// TLS for an `https://` push service, trusting what `tls` trusts).
    package static func connect(
        pushService: String, platform: Platform, token: String? = nil, tls: TLSConfiguration? = nil, query: String = ""
    ) async throws -> TestDevice {
        let address = DeviceAddress(platform: platform, token: token ?? randomToken(for: platform))
        let device = TestDevice(address: address)
        let url = pushService.replacingOccurrences(of: "http://", with: "ws://").replacingOccurrences(of: "https://", with: "wss://")
            + "/device?platform=\(platform.rawValue)&token=\(address.token)" + query
        device.start(url: url, tls: tls)
        try await device.waitFor { $0.notices.contains { $0.type == .subscribed } }
        return device
    }

    /// Opens a multiplexed gateway connection with no devices yet.
    package static func multiplexed(pushService: String) async throws -> TestDevice {
        let device = TestDevice(address: nil)
        device.start(url: pushService.replacingOccurrences(of: "http://", with: "ws://") + GatewayFrame.multiplexPath)
        _ = try await device.writer.value()
        return device
    }

    private func start(url: String, tls: TLSConfiguration? = nil) {
        let task = Task { [self] in
            do {
                try await WebSocketClient.connect(
                    url: url, configuration: .init(maxFrameSize: 16 * 1024 * 1024), tlsConfiguration: tls, logger: Logger(label: "test-device")
                ) { inbound, outbound, _ in
                    self.writer.succeed(outbound)
                    for try await message in inbound.messages(maxSize: 16 * 1024 * 1024) {
                        if case .text(let text) = message { self.frames.withLock { $0.append(text) } }
                    }
                }
            } catch {
                self.failure.withLock { $0 = String(describing: error) }
                self.writer.fail(error)
            }
            self.isClosed.withLock { $0 = true }
        }
        self.task.withLock { $0 = task }
    }

    /// Watches run `run` on the push service's `/observe` and waits for its first (empty) report.
    package static func observer(pushService: String, run: String) async throws -> TestDevice {
        let device = TestDevice(address: nil)
        device.start(url: pushService.replacingOccurrences(of: "http://", with: "ws://") + "/observe?run=\(run)")
        try await device.waitFor { !$0.rawFrames.isEmpty }
        return device
    }

    /// The reports an observer received, in order.
    package var reports: [PushReport] {
        rawFrames.compactMap { try? JSONDecoder().decode(PushReport.self, from: Data($0.utf8)) }
    }

    /// Every hop an observer received, in order.
    package var hops: [PushHop] { reports.flatMap(\.hops) }

    package func send(_ command: GatewayCommand) async throws {
        let text = String(decoding: try JSONEncoder().encode(command), as: UTF8.self)
        try await writer.value().write(.text(text))
    }

    package func sendRaw(_ text: String) async throws {
        try await writer.value().write(.text(text))
    }

    package var closed: Bool { isClosed.withLock { $0 } }
    package var rawFrames: [String] { frames.withLock { $0 } }

    package var pushes: [PushFrame] {
        rawFrames.compactMap { text in
            guard let header = try? JSONDecoder().decode(GatewayFrameHeader.self, from: Data(text.utf8)), header.type == "push" else {
                return nil
            }
            return try? JSONDecoder().decode(PushFrame.self, from: Data(text.utf8))
        }
    }

    package var notices: [GatewayNotice] {
        rawFrames.compactMap { text in
            guard let header = try? JSONDecoder().decode(GatewayFrameHeader.self, from: Data(text.utf8)), header.type != "push" else {
                return nil
            }
            return try? JSONDecoder().decode(GatewayNotice.self, from: Data(text.utf8))
        }
    }

    package struct Timeout: Error, CustomStringConvertible {
        package var frames: [String]
        package var failure: String?
        package var description: String {
            "condition not met in time; frames so far: \(frames)" + (failure.map { "; the socket ended: \($0)" } ?? "")
        }
    }

    /// Polls until `condition` holds; polling keeps the device free of per-test plumbing. The
    /// timeout only bounds a hang: the suite runs beside other builds, and a loaded machine has
    /// taken over 5 s to deliver one push.
    package func waitFor(timeout: Duration = .seconds(60), _ condition: (TestDevice) -> Bool) async throws {
        let deadline = ContinuousClock.now + timeout
        while !condition(self) {
            guard ContinuousClock.now < deadline else { throw Timeout(frames: rawFrames, failure: failure.withLock { $0 }) }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    package func waitForPushes(_ count: Int, timeout: Duration = .seconds(60)) async throws -> [PushFrame] {
        try await waitFor(timeout: timeout) { $0.pushes.count >= count }
        return pushes
    }

    package func close() {
        task.withLock { $0?.cancel() }
    }

}
