import Foundation
import Logging
import NIOHTTP1
import PushFleetBackend
import PushFleetCore
import PushFleetEmbedded
import PushFleetMockPush
import PushFleetServerSupport
import PushFleetTestSupport
import PushFleetWire
import Synchronization
import Testing

/// The service-rate server in virtual time. (Pure; here because PushFleetCoreTests does not
/// depend on PushFleetWire.)
@Suite("Service queue")
struct ServiceQueueTests {
    static let ms: Int64 = 1_000_000

    @Test("at rate R, an item every 1/R is admitted with a delay of 1/R", arguments: [20.0, 100, 400, 1000])
    func steadyArrivals(rate: Double) {
        var queue = ServiceQueue(rate: rate, capacity: 3)
        let interval = Int64((1e9 / rate).rounded())
        let start: Int64 = 5_000_000_000
        for k in 0..<200 {
            #expect(queue.admit(at: start + Int64(k) * interval) == interval, "item \(k)")
        }
    }

    @Test("a burst of capacity + 1 at one instant: the first capacity are admitted, 1/R apart, the last refused")
    func burst() {
        for (rate, capacity) in [(20.0, 5), (400, 100), (1, 1), (1000, 7)] {
            var queue = ServiceQueue(rate: rate, capacity: capacity)
            let service = Int64((1e9 / rate).rounded())
            let delays = (0...capacity).map { _ in queue.admit(at: 0) }
            #expect(delays.dropLast().map { $0 } == (1...capacity).map { Int64($0) * service }, "rate \(rate) capacity \(capacity)")
            #expect(delays.last! == nil, "rate \(rate) capacity \(capacity)")
            // Still full at the same instant.
            #expect(queue.admit(at: 0) == nil)
        }
    }

    @Test("the queue drains at the rate: after idle time it is empty again")
    func drains() {
        var queue = ServiceQueue(rate: 20, capacity: 5)
        for _ in 0..<5 { _ = queue.admit(at: 0) }
        #expect(queue.admit(at: 0) == nil)
        // 100 ms later two have been served: two places, delays counted from the new instant.
        #expect(queue.admit(at: 100 * Self.ms) == 200 * Self.ms)
        #expect(queue.admit(at: 100 * Self.ms) == 250 * Self.ms)
        #expect(queue.admit(at: 100 * Self.ms) == nil)
        // Booked until 350 ms: from then on (and long after) the server is idle, an item waits only its own service.
        #expect(queue.admit(at: 350 * Self.ms) == 50 * Self.ms)
        #expect(queue.admit(at: 10_000 * Self.ms) == 50 * Self.ms)
        // And a full burst fits again.
        let burst = (0..<5).map { _ in queue.admit(at: 20_000 * Self.ms) }
        #expect(burst == [50, 100, 150, 200, 250].map { $0 * Self.ms })
        #expect(queue.admit(at: 20_000 * Self.ms) == nil)
    }

    @Test("each queued item adds 1/R to the delay of the next")
    func delaysGrow() {
        var queue = ServiceQueue(rate: 50, capacity: 1000)
        var previous: Int64 = 0
        for k in 0..<500 {
            // Arrivals twice as fast as the service: the wait grows by 1/R - 1/(2R) per item.
            guard let delay = queue.admit(at: Int64(k) * 10 * Self.ms) else {
                Issue.record("refused item \(k)")
                return
            }
            if k > 0 { #expect(delay - previous == 10 * Self.ms, "item \(k)") }
            previous = delay
        }
        #expect(previous == 20 * Self.ms + 499 * 10 * Self.ms)
    }

    @Test("defaults and clamping: a quarter second's worth of queue, rates within the knob's range")
    func defaults() {
        #expect(ServiceQueue(rate: 400).capacity == 100)
        #expect(ServiceQueue(rate: 2).capacity == 1)
        #expect(ServiceQueue(rate: 10).capacity == 3)
        #expect(ServiceQueue(rate: 0).rate == ServiceQueue.rateRange.lowerBound)
        #expect(ServiceQueue(rate: 1e12).rate == ServiceQueue.rateRange.upperBound)
        #expect(ServiceQueue(rate: 10, capacity: 0).capacity == 1)
    }

    @Test("FaultSettings.problems names the service rate and queue when out of range or alone")
    func problems() {
        #expect(FaultSettings(serviceRate: 20, serviceQueue: 5).problems().isEmpty)
        #expect(FaultSettings(serviceRate: 20).problems().isEmpty)
        #expect(FaultSettings(serviceRate: -1).problems() == ["serviceRate must be between 0.001 and 10000000 pushes/s, got -1.0"])
        #expect(FaultSettings(serviceRate: 0).problems().count == 1)
        #expect(FaultSettings(serviceRate: 20, serviceQueue: 0).problems() == ["serviceQueue must be between 1 and 10000000, got 0"])
        #expect(FaultSettings(serviceQueue: 5).problems() == ["serviceQueue goes with serviceRate"])
        #expect(BackendLatency(sendRate: 0).problems.count == 1)
        #expect(BackendLatency(sendRate: 10, sendQueue: 0).problems.count == 1)
        #expect(BackendLatency(sendRate: 10, sendQueue: 3).problems.isEmpty)
    }
}

/// The service-rate knobs on the real servers: the mock push service's (429 TooManyRequests
/// beyond its queue) and the reference backend's (503 beyond its send queue).
@Suite("Service rate")
struct ServiceRateTests {
    struct Answer: Sendable {
        var status: Int
        var reason: String?
    }

    /// `count` APNs pushes to `token`, all at once.
    static func burst(_ count: Int, token: String, base: String) async throws -> [Answer] {
        try await withThrowingTaskGroup(of: Answer.self) { group in
            for _ in 0..<count {
                group.addTask {
                    let response = try await TestHTTP.request(
                        .POST, "\(base)/3/device/\(token)", body: Data(#"{"aps":{"alert":"hi"}}"#.utf8),
                        headers: [("authorization", TestCredentials.apnsAuthorization), ("apns-topic", "com.example.app")]
                    )
                    let reason = (try? JSONSerialization.jsonObject(with: response.body) as? [String: String])?["reason"]
                    return Answer(status: response.status, reason: reason)
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
    }

    @Test("on a clock that stands still, 30 pushes at once to a service of 20/s and a queue of 5: exactly 5 accepted, 25 answered 429 TooManyRequests")
    func exactBurst() async throws {
        // Every push arrives at the same instant of the service's clock, so the queue decides alone.
        let frozen = WallClock.nanoseconds()
        let service = PushService(configuration: .init(faults: FaultSettings(serviceRate: 20, serviceQueue: 5)), now: { frozen })
        let server = MockPushServer(service: service)
        var logger = Logger(label: "service-rate")
        logger.logLevel = .warning
        try await withServices(server.makeServices(logger: logger), logger: logger) {
            let base = try await server.bound.value().httpURL
            let answers = try await Self.burst(30, token: TestDevice.randomToken(for: .apns), base: base)
            #expect(answers.count == 30)
            #expect(answers.filter { $0.status == 200 }.count == 5, "\(answers.map(\.status))")
            let refused = answers.filter { $0.status != 200 }
            #expect(refused.count == 25)
            #expect(refused.allSatisfy { $0.status == 429 && $0.reason == "TooManyRequests" }, "\(refused.map { "\($0.status) \($0.reason ?? "-")" })")
            let stats = service.stats()
            #expect(stats.accepted == 5)
            #expect(stats.rejected["apns:TooManyRequests"] == 25)
        }
    }

    @Test("faults at start with serviceRate 20 and serviceQueue 5: the pushes beyond the queue get 429, the rest 200 and are delivered at the rate")
    func burstOverHTTP() async throws {
        var configuration = EmbeddedSystem.Configuration()
        configuration.pushService.faults = FaultSettings(serviceRate: 20, serviceQueue: 5)
        try await TestSystem.run(configuration) { (system: TestSystem) async throws in
            let device = try await TestDevice.connect(pushService: system.pushService, platform: .apns)
            let token = device.address!.token
            let sent = ContinuousClock.now
            let answers = try await Self.burst(30, token: token, base: system.pushService)
            let spread = ContinuousClock.now - sent
            let accepted = answers.filter { $0.status == 200 }.count
            // The first five always find room; each 50 ms the burst lasted frees one place more.
            let most = 6 + Int(spread / .milliseconds(50))
            #expect(accepted >= 5 && accepted <= most, "\(accepted) accepted over \(spread)")
            let refused = answers.filter { $0.status != 200 }
            #expect(refused.count == 30 - accepted)
            #expect(refused.count >= 30 - most)
            #expect(refused.allSatisfy { $0.status == 429 && $0.reason == "TooManyRequests" }, "\(refused.map { "\($0.status) \($0.reason ?? "-")" })")
            // The accepted ones are delivered one service time (50 ms) apart: the last one no
            // sooner than accepted × 50 ms after the burst began.
            let pushes = try await device.waitForPushes(accepted)
            #expect(ContinuousClock.now - sent >= .milliseconds(50 * accepted - 1))
            #expect(pushes.count == accepted)
            let stats = try await system.pushStats()
            #expect(stats.accepted == accepted)
            #expect(stats.rejected["apns:TooManyRequests", default: 0] == 30 - accepted)
            #expect(try await system.pushStats().delivered == accepted)
            try await Task.sleep(for: .milliseconds(300))
            #expect(device.pushes.count == accepted, "no refused push is delivered")
        }
    }

    @Test("PUT /admin/faults refuses a service rate out of range and a queue without a rate")
    func adminValidation() async throws {
        try await TestSystem.run { (system: TestSystem) async throws in
            let url = "\(system.pushService)/admin/faults"
            let negative = try await TestHTTP.request(.PUT, url, auth: system.admin, body: Data(#"{"serviceRate": -1}"#.utf8))
            #expect(negative.status == 400)
            #expect(negative.text.contains("serviceRate must be between"), "\(negative.text)")
            let alone = try await TestHTTP.request(.PUT, url, auth: system.admin, body: Data(#"{"serviceQueue": 5}"#.utf8))
            #expect(alone.status == 400)
            #expect(alone.text.contains("serviceQueue goes with serviceRate"), "\(alone.text)")
            let emptyQueue = try await TestHTTP.request(.PUT, url, auth: system.admin, body: Data(#"{"serviceRate": 10, "serviceQueue": 0}"#.utf8))
            #expect(emptyQueue.status == 400)
            // Nothing refused was applied.
            #expect(try await TestHTTP.request(.GET, url, auth: system.admin).json(FaultSettings.self) == FaultSettings())
            // A valid pair is applied and read back, and acts at once: at 1/s with a queue of 1,
            // pushes in quick succession find the server booked. (The queue counts booked service
            // time: one push in service and a second arriving a moment later fit, a third does not.)
            let valid = try await TestHTTP.request(.PUT, url, auth: system.admin, body: Data(#"{"serviceRate": 1, "serviceQueue": 1}"#.utf8))
            #expect(valid.status == 200, "\(valid.text)")
            let read = try await TestHTTP.request(.GET, url, auth: system.admin).json(FaultSettings.self)
            #expect(read.serviceRate == 1 && read.serviceQueue == 1)
            let token = TestDevice.randomToken(for: .apns)
            let started = ContinuousClock.now
            var statuses: [Int] = []
            for _ in 0..<3 { statuses.append(try await system.apnsPush(token: token).status) }
            let elapsed = ContinuousClock.now - started
            #expect(statuses.first == 200)
            if elapsed < .seconds(1) {
                #expect(statuses.last == 429, "\(statuses) in \(elapsed)")
            }
            #expect(try await system.pushStats().rejected["apns:TooManyRequests", default: 0] == statuses.filter { $0 == 429 }.count)
            // Without the rate, no limit.
            try await system.setFaults(FaultSettings())
            #expect(try await system.apnsPush(token: token).status == 200)
        }
    }

    @Test("the reference backend's send rate: sends beyond its queue are answered 503 with Retry-After; fetches are not limited")
    func backendSendRate() async throws {
        try await TestSystem.runEmbedded { system, test in
            _ = try await test.device("bob", .apns)
            #expect(try await test.sendPlain(from: "ann", to: "bob", pns: "apns", message: "before").status == 200)
            // 2 sends/s, one waiting: of 8 at once, the first is served in 500 ms, a second may
            // wait (it arrives a little later), the rest are refused.
            system.configuration.backend.faults.replace(with: BackendLatency(sendRate: 2, sendQueue: 1))
            let started = ContinuousClock.now
            // Two fetches go along: the queue is for sends only.
            let answers = try await withThrowingTaskGroup(of: (send: Bool, response: TestResponse).self) { group in
                for index in 0..<8 {
                    group.addTask { (true, try await test.sendPlain(from: "ann", to: "bob", pns: "apns", message: "m\(index)")) }
                }
                for _ in 0..<2 {
                    group.addTask { (false, try await TestHTTP.request(.GET, "\(test.backend)/api/notifications/nope", auth: .user("ann"))) }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            let spread = ContinuousClock.now - started
            let sends = answers.filter(\.send).map(\.response)
            let refused = sends.filter { $0.status == 503 }
            let taken = sends.filter { $0.status != 503 }
            #expect(taken.allSatisfy { $0.status == 200 }, "\(taken.map(\.status))")
            // Each 500 ms the sends took to arrive frees one place more (a loaded machine spreads them).
            #expect(taken.count >= 1 && taken.count <= 3 + Int(spread / .milliseconds(500)), "\(taken.count) taken over \(spread)")
            #expect(refused.count == 8 - taken.count)
            #expect(refused.allSatisfy { $0.headers.first(name: "Retry-After") == "1" }, "\(refused.map(\.headers))")
            #expect(refused.allSatisfy { $0.text.contains("send queue is full") }, "\(refused.first?.text ?? "")")
            // The taken sends waited for the rate: at least one service time.
            #expect(spread >= .milliseconds(499))
            let fetches = answers.filter { !$0.send }.map(\.response.status)
            #expect(fetches.count == 2 && !fetches.contains(503), "\(fetches)")
            // Lifted: sends go through again.
            system.configuration.backend.faults.replace(with: BackendLatency())
            #expect(try await test.sendPlain(from: "ann", to: "bob", pns: "apns", message: "after").status == 200)
        }
    }
}
