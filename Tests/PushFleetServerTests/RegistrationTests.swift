import Foundation
import NIOHTTP1
import PushFleetBackend
import PushFleetEmbedded
import PushFleetTestSupport
import PushFleetWire
import Testing

@Suite("Registrations")
struct RegistrationTests {
    @Test("POST register with a known handle returns the caller's first id and deletes the others")
    func handleDedupe() async throws {
        try await TestSystem.run { (system: TestSystem) async throws in
            let handle = TestDevice.randomToken(for: .apns)
            // Two registrations end up bound to one handle (the client lost its cached id once).
            let first = try await system.register("bob", platform: .apns, handle: handle)
            let second = try await system.createRegistrationID("bob", handle: nil)
            #expect(try await system.updateRegistration(second, "bob", platform: "apns", handle: handle).status == 200)
            #expect(first != second)

            let again = try await system.createRegistrationID("bob", handle: handle)
            #expect(again == first)
            // The duplicate is gone.
            #expect(try await system.updateRegistration(second, "bob", platform: "apns", handle: handle).status == 410)
            #expect(try await system.backendStats().registrations == 1)

            // The device moved to another user: it gets a fresh id and bob's binding is dropped.
            let carols = try await system.createRegistrationID("carol", handle: handle)
            #expect(carols != first)
            #expect(try await system.updateRegistration(first, "bob", platform: "apns", handle: handle).status == 410)
        }
    }

    @Test("an expired id answers 410; the client's retry with a new id succeeds")
    func expiredRegistration() async throws {
        // The backend's clock is the test's: the id expires when the test says, and the fresh one
        // cannot expire before its PUT however loaded the machine.
        let clock = ManualWallClock()
        var configuration = EmbeddedSystem.Configuration()
        configuration.backend.registrationTTL = .milliseconds(1500)
        configuration.backend.clock = { clock.now }
        try await TestSystem.run(configuration) { (system: TestSystem) async throws in
            let handle = TestDevice.randomToken(for: .fcm)
            let id = try await system.createRegistrationID("bob", handle: handle)
            clock.advance(by: .milliseconds(1800))
            let gone = try await system.updateRegistration(id, "bob", platform: "fcm", handle: handle)
            #expect(gone.status == 410)
            // The seed's client: drop the cached id, create one, PUT again.
            let fresh = try await system.createRegistrationID("bob", handle: handle)
            #expect(fresh != id)
            #expect(try await system.updateRegistration(fresh, "bob", platform: "fcm", handle: handle).status == 200)
            #expect(try await system.updateRegistration("never-issued", "bob", platform: "fcm", handle: handle).status == 410)
        }
    }

    @Test("a username tag naming another user is refused; the caller's own is accepted")
    func tagSpoofing() async throws {
        try await TestSystem.run { (system: TestSystem) async throws in
            let victim = try await system.device("alice", .apns)
            let handle = TestDevice.randomToken(for: .apns)
            let id = try await system.createRegistrationID("mallory", handle: handle)
            let spoof = try await system.updateRegistration(id, "mallory", platform: "apns", handle: handle, tags: ["username:alice"])
            #expect(spoof.status == 403)
            #expect(spoof.text.contains("username:alice"))
            let own = try await system.updateRegistration(
                id, "mallory", platform: "apns", handle: handle, tags: ["username:mallory", "sports", "city:Paris"]
            )
            #expect(own.status == 200)
            // alice's notifications still reach only alice's device.
            let send = try await system.sendPlain(from: "bob", to: "alice", pns: "apns", message: "hi")
            #expect(try send.json(SendOutcome.self).targets == 1)
            _ = try await victim.waitForPushes(1)
        }
    }

    @Test("only the owner may update or delete a registration")
    func ownerOnly() async throws {
        try await TestSystem.run { (system: TestSystem) async throws in
            let handle = TestDevice.randomToken(for: .apns)
            let id = try await system.register("bob", platform: .apns, handle: handle)
            #expect(try await system.updateRegistration(id, "eve", platform: "apns", handle: handle).status == 403)
            let foreignDelete = try await TestHTTP.request(.DELETE, "\(system.backend)/api/register/\(id)", auth: .user("eve"))
            #expect(foreignDelete.status == 403)
            let delete = try await TestHTTP.request(.DELETE, "\(system.backend)/api/register/\(id)", auth: .user("bob"))
            #expect(delete.status == 200)
            let again = try await TestHTTP.request(.DELETE, "\(system.backend)/api/register/\(id)", auth: .user("bob"))
            #expect(again.status == 410)
            let send = try await system.sendPlain(from: "alice", to: "bob", pns: "apns", message: "anyone?")
            #expect(send.status == 200)
            #expect(try send.json(SendOutcome.self).outcome == .noTargetFound)
        }
    }

    @Test("concurrent sends to a user whose only handle is dead: each finds no target (200), none is abandoned (500), the handle is removed once")
    func concurrentSendsToDeadHandle() async throws {
        try await TestSystem.run { (system: TestSystem) async throws in
            let stale = try await system.device("bob", .apns)
            try await system.setFaults(FaultSettings(unregisteredTokens: [stale.address!.token]))
            // Sends that found the handle before any of them removed it all hear Unregistered;
            // only one removes it.
            let statuses = try await withThrowingTaskGroup(of: (Int, SendOutcome.State?).self) { group in
                for index in 0..<16 {
                    group.addTask {
                        let send = try await system.sendPlain(from: "alice", to: "bob", pns: "apns", message: "dead \(index)")
                        return (send.status, try? send.json(SendOutcome.self).outcome)
                    }
                }
                return try await group.reduce(into: [(Int, SendOutcome.State?)]()) { $0.append($1) }
            }
            #expect(statuses.allSatisfy { $0.0 == 200 && $0.1 == .noTargetFound }, "\(statuses)")
            #expect(try await system.backendStats().feedbackRemoved == 1)
        }
    }

    @Test("the push service's Unregistered answer removes the registration")
    func feedbackLoop() async throws {
        try await TestSystem.run { (system: TestSystem) async throws in
            let stale = try await system.device("bob", .apns)
            let live = try await system.device("bob", .fcm)
            try await system.setFaults(FaultSettings(unregisteredTokens: [stale.address!.token]))

            let first = try await system.sendSecure(from: "alice", to: "bob", payload: "one")
            let outcome = try first.json(SendOutcome.self)
            #expect(first.status == 200)
            #expect(outcome.targets == 2 && outcome.accepted == 1 && outcome.removed == 1)
            #expect(try await system.backendStats().feedbackRemoved == 1)

            let second = try await system.sendSecure(from: "alice", to: "bob", payload: "two")
            #expect(try second.json(SendOutcome.self).targets == 1)
            _ = try await live.waitForPushes(2)
            #expect(stale.pushes.isEmpty)

            // A user whose every handle is dead: nothing left to target, not a failure.
            try await system.setFaults(FaultSettings(unregisteredTokens: [live.address!.token]))
            let third = try await system.sendPlain(from: "alice", to: "bob", pns: "fcm", message: "three")
            #expect(third.status == 200)
            #expect(try third.json(SendOutcome.self).outcome == .noTargetFound)
        }
    }

    @Test("a send the push service never accepts is Abandoned: 500, after retries")
    func abandoned() async throws {
        var configuration = EmbeddedSystem.Configuration()
        configuration.backend.pushBackoff = .milliseconds(1)
        try await TestSystem.run(configuration) { (system: TestSystem) async throws in
            _ = try await system.device("bob", .apns)
            try await system.setFaults(FaultSettings(throttle: 1))
            let send = try await system.sendPlain(from: "alice", to: "bob", pns: "apns", message: "hello")
            #expect(send.status == 500)
            #expect(try send.json(SendOutcome.self).outcome == .abandoned)
            let stats = try await system.backendStats()
            #expect(stats.pnsRequests == 4 && stats.pnsRetried == 3 && stats.pnsFailed == 1)
        }
    }
}
