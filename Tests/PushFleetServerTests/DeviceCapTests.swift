import Foundation
import Logging
import NIOHTTP1
import PushFleetEmbedded
@testable import PushFleetMockPush
import PushFleetServerSupport
import PushFleetTestSupport
import PushFleetWire
import Synchronization
import Testing

/// Device sockets never starve the push path: devices take at most their share of the push
/// port's connections, one past it is refused at once with a 503 that names the cap, and
/// providers and admin are served throughout.
@Suite("Device cap")
struct DeviceCapTests {
    // MARK: The counting, without sockets

    @Test("admits up to the cap, refuses past it, and starts one episode")
    func admitsThenRefuses() {
        var cap = DeviceCap(cap: 3)
        #expect((0..<3).map { _ in cap.admit() } == [.admit, .admit, .admit])
        #expect(cap.admit() == .refuse(startsEpisode: true))
        #expect(cap.admit() == .refuse(startsEpisode: false))
        #expect(cap.admit() == .refuse(startsEpisode: false))
        #expect(cap.held == 3 && cap.refused == 3 && cap.episodes == 1 && cap.refusedInEpisode == 3)
    }

    @Test("an episode ends a twentieth below the cap, not at the first socket to leave")
    func episodeHysteresis() {
        var cap = DeviceCap(cap: 40)
        #expect(cap.resumeAt == 38)
        for _ in 0..<40 { _ = cap.admit() }
        #expect(cap.admit() == .refuse(startsEpisode: true))
        // One leaves and one comes back: still the same episode, nothing more to log.
        #expect(cap.release() == .none)
        #expect(cap.admit() == .admit)
        #expect(cap.admit() == .refuse(startsEpisode: false))
        #expect(cap.release() == .none)
        #expect(cap.release() == .episodeEnded(refused: 2))
        #expect(cap.refusedInEpisode == nil)
        // Full again later: a second episode.
        #expect(cap.admit() == .admit)
        #expect(cap.admit() == .admit)
        #expect(cap.admit() == .refuse(startsEpisode: true))
        #expect(cap.episodes == 2 && cap.refused == 3)
    }

    @Test("a release with nothing held changes nothing; a cap of 1 still ends its episode")
    func edges() {
        var cap = DeviceCap(cap: 1)
        #expect(cap.release() == .none && cap.held == 0)
        #expect(cap.admit() == .admit)
        #expect(cap.admit() == .refuse(startsEpisode: true))
        #expect(cap.release() == .episodeEnded(refused: 1))
        var none = DeviceCap(cap: 0)
        #expect(none.admit() == .refuse(startsEpisode: true))
    }

    @Test("the default device cap keeps a reserve for providers: a tenth, at least 128, at most half, at most 1,024")
    func defaultReserve() {
        #expect(DeviceCap.defaultCap(total: 9_968) == 8_972)
        #expect(DeviceCap.defaultCap(total: 480) == 352)
        #expect(DeviceCap.defaultCap(total: 40) == 20)
        #expect(DeviceCap.defaultCap(total: 4) == 2)
        #expect(DeviceCap.defaultCap(total: 1) == 1)
        #expect(DeviceCap.defaultCap(total: 1_000_000) == 998_976)
    }

    // MARK: Against the running service

    /// A WebSocket upgrade for one device, as bytes on a raw socket.
    static func upgradeRequest(token: String) -> String {
        "GET /device?platform=apns&token=\(token) HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    }

    static func port(_ base: String) -> Int { Int(base.split(separator: ":").last!)! }

    @Test("60 devices against a push port of 40 connections: 20 held, 40 refused at once with the cap named, providers and admin served")
    func devicesPastTheCap() async throws {
        let logs = LogCapture()
        let logger = logs.logger(level: .notice)
        var configuration = EmbeddedSystem.Configuration()
        configuration.pushServer.limits = ServerLimits(maxConnections: 40)
        let deviceCap = MockPushServer.Configuration.deviceCap(total: 40)
        #expect(deviceCap == 20)
        try await EmbeddedSystem.withRunning(configuration, logger: logger) { system, endpoints in
            let admin = TestAuth.bearer(try #require(system.pushServer?.configuration.adminToken))
            // The devices the port holds.
            let held: [TestDevice]
            do {
                held = try await withThrowingTaskGroup(of: TestDevice.self) { group in
                    for _ in 0..<deviceCap { group.addTask { try await TestDevice.connect(pushService: endpoints.pushService, platform: .apns) } }
                    return try await group.reduce(into: [TestDevice]()) { $0.append($1) }
                }
            } catch {
                // What the server saw, so a failure here can be read.
                let stats = try? await TestHTTP.request(.GET, "\(endpoints.pushService)/admin/stats", auth: admin).text
                Issue.record("a device under the cap was not held: \(error); server log: \(logs.lines); stats: \(stats ?? "none")")
                throw error
            }
            let token = held[0].address!.token
            let id = try await TestHTTP.request(.POST, "\(endpoints.backend)/api/register?handle=\(token)", auth: .user("bob")).text
                .trimmingCharacters(in: CharacterSet(charactersIn: "\""))
            let registration = ["Platform": "apns", "Handle": token]
            #expect(try await TestHTTP.request(.PUT, "\(endpoints.backend)/api/register/\(id)", auth: .user("bob"), json: registration).status == 200)
            // Forty more at once: each answered 503 and closed, none left waiting in the backlog.
            let port = Self.port(endpoints.pushService)
            let refused = try await withThrowingTaskGroup(of: RawSocket.Exchange.self) { group in
                for _ in 0..<40 {
                    group.addTask {
                        // Bounded only against a hang: a loaded machine may take seconds to answer forty.
                        try await RawSocket.exchange(port: port, Self.upgradeRequest(token: TestDevice.randomToken(for: .apns)), waitFor: .seconds(30))
                    }
                }
                return try await group.reduce(into: [RawSocket.Exchange]()) { $0.append($1) }
            }
            for answer in refused {
                #expect(answer.response.hasPrefix("HTTP/1.1 503"), "\(answer.response.prefix(80))")
                #expect(answer.response.contains(#""cap":20"#) && answer.response.contains("push service at its connection cap of 20 devices"))
                #expect(answer.closed, "refused device left open for \(answer.seconds) s")
            }
            // Providers are served while the devices hold their share: through the backend, and
            // on a new connection straight to the push service.
            let send = try await TestHTTP.request(
                .POST, "\(endpoints.backend)/api/notifications?pns=apns&to_tag=bob", auth: .user("alice"), json: "still served"
            )
            #expect(send.status == 200)
            #expect(try await held[0].waitForPushes(1).count == 1)
            let direct = try await TestHTTP.request(
                .POST, "\(endpoints.pushService)/3/device/\(held[1].address!.token)", body: Data(#"{"aps":{"alert":"hi"}}"#.utf8),
                headers: [("authorization", TestCredentials.apnsAuthorization), ("apns-topic", "com.example.app")]
            )
            #expect(direct.status == 200)
            #expect(try await held[1].waitForPushes(1).count == 1)
            let stats = try await TestHTTP.request(.GET, "\(endpoints.pushService)/admin/stats", auth: admin).json(PushServiceStats.self)
            #expect(stats.deviceCap == 20 && stats.deviceSockets == 20)
            #expect(stats.deviceCapRefused == 40 && stats.deviceCapReached == 1)
            // Logged once for the episode, not once per refused device.
            let warnings = logs.lines.filter { $0.contains("connection cap of 20 devices") }
            #expect(warnings.count == 1, "\(warnings)")
            // Devices leaving end the episode; a new device is then admitted.
            for device in held.prefix(2) { device.close() }
            try await held[0].waitFor { $0.closed }
            try await held[1].waitFor { $0.closed }
            // The client's side closing is not the server's: wait until it has let both places go.
            let deadline = ContinuousClock.now + .seconds(10)
            while try await TestHTTP.request(.GET, "\(endpoints.pushService)/admin/stats", auth: admin).json(PushServiceStats.self).deviceSockets ?? 0 > 18 {
                guard ContinuousClock.now < deadline else { break }
                try await Task.sleep(for: .milliseconds(20))
            }
            let late = try await TestDevice.connect(pushService: endpoints.pushService, platform: .apns)
            #expect(late.closed == false)
            // Logged as the server takes the device in; a loaded machine may write it later.
            try await eventually(within: .seconds(30)) { logs.lines.contains { $0.contains("below the cap of 20 again; 40 refused") } }
            #expect(logs.lines.contains { $0.contains("below the cap of 20 again; 40 refused") }, "\(logs.lines)")
            for device in held.dropFirst(2) { device.close() }
            late.close()
        }
    }

    @Test("the multiplexed gateway path counts against the same cap")
    func multiplexedPath() async throws {
        var configuration = EmbeddedSystem.Configuration()
        configuration.pushServer.limits = ServerLimits(maxConnections: 40)
        configuration.pushServer.maxDeviceConnections = 2
        try await TestSystem.run(configuration) { (system: TestSystem) async throws in
            let first = try await TestDevice.multiplexed(pushService: system.pushService)
            let second = try await TestDevice.connect(pushService: system.pushService, platform: .fcm)
            let answer = try await RawSocket.exchange(
                port: Self.port(system.pushService),
                "GET /gateway HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
                // The refusal closes the connection: the wait only bounds a hang on a loaded machine.
                waitFor: .seconds(60)
            )
            #expect(answer.response.hasPrefix("HTTP/1.1 503") && answer.response.contains(#""cap":2"#), "\(answer.response.prefix(80))")
            // A request that is no upgrade is never counted: health and a bad device path answer as before.
            #expect(try await TestHTTP.request(.GET, "\(system.pushService)/health").status == 200)
            #expect(try await TestHTTP.request(.GET, "\(system.pushService)/device?platform=apns&token=zz").status == 400)
            first.close()
            second.close()
        }
    }
}
