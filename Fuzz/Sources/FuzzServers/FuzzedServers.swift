import Dispatch
import Foundation
import Logging
import PushFleetBackend
import PushFleetEmbedded
import PushFleetMockPush
import PushFleetServerSupport
import PushFleetWire
import ServiceLifecycle
import Synchronization

/// The embedded system, started on first use and kept for the life of the fuzzing process.
///
/// User `fuzz` (password `fuzz`) has one registration on each platform, kept alive by the harness,
/// so that sends to `to_tag=fuzz` reach the push sender and the push service. Inputs cannot know
/// the backend's random registration ids: `@ID@` in an input stands for the APNs one.
final class FuzzedServers: Sendable {
    /// Where an input goes; its first byte picks one.
    enum Port: CaseIterable, CustomStringConvertible {
        case backend
        case pushHTTP1
        case pushHTTP2

        var description: String {
            switch self {
            case .backend: "backend (HTTP/1.1)"
            case .pushHTTP1: "push service (HTTP/1.1, admin, device gateway)"
            case .pushHTTP2: "push service (h2c)"
            }
        }
    }

    /// The admin API's token and the login-token secret, fixed so that the corpus
    /// (Fuzz/make_servers_corpus.py) can carry valid ones.
    static let adminToken = "fuzz-admin-token-0123456789abcdef"
    static let tokenSecret = "fuzz-token-secret-0123456789abcdef"
    static let placeholder = Array("@ID@".utf8)
    static let fixedDevices: [(platform: String, handle: String)] = [
        ("apns", String(repeating: "a1", count: 32)), ("fcm", "fcm-token:fuzz"), ("wns", "chan-fuzz"),
    ]
    /// Registrations live this long; the harness renews its own at half of it.
    static let registrationTTL: Duration = .seconds(60)

    static let shared = FuzzedServers()

    let system: EmbeddedSystem
    private let ports: [Int]
    private let fixed = Mutex<(ids: [String], renewed: ContinuousClock.Instant)>(([], .now))

    private init() {
        var configuration = EmbeddedSystem.Configuration()
        // Short lives and small limits keep what the inputs store from piling up over a long run.
        configuration.backend.registrationTTL = Self.registrationTTL
        configuration.backend.notificationTTL = .seconds(5)
        configuration.backend.storeLimits = StoreLimits(maxRegistrations: 200_000, maxNotifications: 20_000, maxNotificationBytes: 256 << 20)
        configuration.backend.tokenSecret = Data(Self.tokenSecret.utf8)
        configuration.pushService.defaultStoreDuration = .seconds(5)
        configuration.pushServer = .init(http2Listen: .init(host: "127.0.0.1", port: 0), adminToken: Self.adminToken)
        let system = EmbeddedSystem(configuration: configuration)
        var logger = Logger(label: "fuzz-servers")
        logger.logLevel = .critical
        let group = ServiceGroup(
            configuration: .init(services: system.makeServices(logger: logger).map { .init(service: $0) }, logger: logger)
        )
        Task.detached {
            do {
                try await group.run()
            } catch {
                fatalError("the servers stopped: \(error)")
            }
            fatalError("the servers stopped")
        }
        let ready = DispatchSemaphore(value: 0)
        let endpoints = Box()
        Task.detached {
            let found = try? await system.endpoints()
            endpoints.value.withLock { $0 = found }
            ready.signal()
        }
        guard ready.wait(timeout: .now() + 120) == .success, let found = endpoints.value.withLock({ $0 }),
            let h2 = found.pushServiceHTTP2
        else {
            fatalError("the servers did not start")
        }
        self.system = system
        self.ports = [found.backend, found.pushService, h2].map { Int($0.split(separator: ":").last!)! }
        renewFixedDevices()
    }

    func port(_ port: Port) -> Int {
        ports[Port.allCases.firstIndex(of: port)!]
    }

    /// The input to send: the placeholder replaced by the fixed APNs registration's id.
    func request(from input: UnsafeRawBufferPointer) -> (bytes: [UInt8], usedPlaceholder: Bool) {
        let bytes = Array(input)
        guard bytes.contains(Self.placeholder) else { return (bytes, false) }
        let id = Array(fixed.withLock { $0.ids.first ?? "none" }.utf8)
        var result: [UInt8] = []
        var index = 0
        while index < bytes.count {
            if bytes[index] == Self.placeholder[0], bytes[index...].starts(with: Self.placeholder) {
                result += id
                index += Self.placeholder.count
            } else {
                result.append(bytes[index])
                index += 1
            }
        }
        return (result, true)
    }

    /// Puts back what an input may have changed: faults set through the admin API would change how
    /// the next inputs are answered, and the fixed registration an input named may be gone.
    func reset(afterPlaceholder: Bool) {
        system.pushServer?.service.replaceFaults(with: FaultSettings())
        let due = fixed.withLock { ContinuousClock.now - $0.renewed > Self.registrationTTL / 3 }
        if afterPlaceholder || due { renewFixedDevices() }
    }

    /// `POST /api/register?handle=` and `PUT /api/register/{id}` for each fixed device, as the
    /// seeds' app does; the same handle gives back the same id while it lives.
    private func renewFixedDevices() {
        var ids: [String] = []
        let authorization = "Basic " + Data("fuzz:fuzz".utf8).base64EncodedString()
        for device in Self.fixedDevices {
            let created = call("POST /api/register?handle=\(device.handle)", authorization: authorization, body: nil)
            guard created.status == 200, let id = try? JSONDecoder().decode(String.self, from: Data(created.body)) else {
                fatalError("the harness could not register its \(device.platform) device: status \(created.status)")
            }
            let body = "{\"Platform\":\"\(device.platform)\",\"Handle\":\"\(device.handle)\",\"Tags\":[\"fuzz-tag\"]}"
            let updated = call("PUT /api/register/\(id)", authorization: authorization, body: body)
            guard updated.status == 200 else {
                fatalError("the harness could not update its \(device.platform) registration: status \(updated.status)")
            }
            ids.append(id)
        }
        fixed.withLock { $0 = (ids, .now) }
    }

    private func call(_ line: String, authorization: String, body: String?) -> (status: Int, body: ArraySlice<UInt8>) {
        var text = "\(line) HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: \(authorization)\r\nConnection: close\r\n"
        if let body { text += "Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n" }
        text += "\r\n" + (body ?? "")
        let exchange = Array(text.utf8).withUnsafeBytes { Exchange.run(port: port(.backend), $0) }
        guard let response = HTTPResponses.parse(exchange.answer).first else { return (0, []) }
        return (response.status, response.body)
    }
}

/// The endpoints, handed from the task that waits for them to the thread that starts fuzzing.
private final class Box: Sendable {
    let value = Mutex<EmbeddedSystem.Endpoints?>(nil)
}
