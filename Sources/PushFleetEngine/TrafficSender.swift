import Foundation
import NIOCore
import NIOHTTP1
import PushFleetCore
import PushFleetLedger
import PushFleetWire
import Synchronization
import PushFleetClients
import PushFleetMetrics

/// One open-model sender: each send has an intended start from the profile, and its latency is
/// measured from that instant, so a stalled backend cannot hide its stall by slowing the
/// sender down (coordinated omission). Sends due while `maxInFlight` are open are dropped and
/// counted, never silently skipped.
struct TrafficSender: Sendable {
    let traffic: Scenario.Traffic
    let index: Int
    let names: FleetNames
    /// The schedule's share this process makes; every shard draws every send's parties, so
    /// the shards' sends together are exactly the single run's.
    var shard = Shard.whole

    /// The calls one send makes: one reaching every targeted platform, or one per targeted
    /// platform (`per_platform`, or requests per platform), each with its platform's step.
    /// Chosen once per sender, not per send.
    struct Call: Sendable {
        var step: APIStep
        /// The platform a call per platform is for (`{{platform}}`).
        var platform: Scenario.PlatformName?
        var platforms: [Scenario.PlatformName]
    }

    func calls(_ api: APIDescription, fleet: [Scenario.PlatformName]) -> [Call] {
        guard let step = api.send[traffic.kind] else { return [] }
        guard step.callsPerPlatform else {
            return [Call(step: step, platform: nil, platforms: traffic.kind == .plain ? traffic.platforms : fleet)]
        }
        return traffic.platforms.compactMap { platform in step.on(platform).map { Call(step: $0, platform: platform, platforms: [platform]) } }
    }

    /// How late a sender may wake before the send counts against the generator.
    static let lateWake: Int64 = 10_000_000

    /// Plays the traffic's sends; a stop request ends its pacing through `waits`, and the sends in
    /// flight finish.
    func run(_ context: RunContext, trafficStart: Int64, waits: InterruptibleWaits) async {
        let calls = calls(context.spec.api, fleet: context.spec.scenario.fleetPlatforms)
        let instants = traffic.profile.schedule
        var rng = SplitMix64(seed: context.spec.scenario.seed ^ stableHash(traffic.name, seed: UInt64(index)))
        let inFlight = InFlight()
        let base = trafficStart + traffic.start.nanoseconds
        let limit = shard.share(of: traffic.maxInFlight)
        await withDiscardingTaskGroup { group in
            for (number, offset) in instants.enumerated() {
                let intended = base + offset
                guard shard.owns(send: number) else {
                    _ = choose(&rng, users: context.spec.plan.users)
                    continue
                }
                guard await context.pace(until: intended, waits) else { break }
                // Waking late is the fleet's own doing; a send waiting for a connection is not.
                let woke = context.now()
                if woke - intended > Self.lateWake { context.emit(.senderLate(lag: woke - intended)) }
                let (from, to) = choose(&rng, users: context.spec.plan.users)
                guard inFlight.enter(limit: limit) else {
                    context.emit(.sendDropped(at: intended))
                    continue
                }
                // Runs here until the request is written: no other thread is woken for it.
                group.addImmediateTask {
                    await send(calls, from: from, to: to, intended: intended, context: context)
                    inFlight.leave()
                }
            }
        }
    }

    private func pick(_ party: Scenario.Traffic.Party, _ rng: inout SplitMix64, users: Int, sender: Int?) -> Int {
        switch party {
        case .randomUser: return Int(rng.next() % UInt64(users))
        case .selfUser: return sender ?? 0
        case .user(let name): return names.userIndex(name, users: users) ?? 0
        case .group(let group): return names.userIndex(group[Int(rng.next() % UInt64(group.count))], users: users) ?? 0
        }
    }

    private func choose(_ rng: inout SplitMix64, users: Int) -> (Int, Int) {
        let from = pick(traffic.from, &rng, users: users, sender: nil)
        return (from, pick(traffic.to, &rng, users: users, sender: from))
    }

    private func send(_ calls: [Call], from: Int, to: Int, intended: Int64, context: RunContext) async {
        let base = RequestValues(
            user: from, userName: context.spec.names.user(from), password: context.spec.names.password(from), run: context.spec.runID, users: context.spec.users,
            to: context.spec.names.user(to)
        )
        guard calls.count > 1 else {
            if let call = calls.first { await self.call(call, base: base, from: from, to: to, intended: intended, context: context) }
            return
        }
        // One call per platform, as the seed's app does with its switches, all at once.
        await withDiscardingTaskGroup { group in
            for call in calls {
                group.addTask { await self.call(call, base: base, from: from, to: to, intended: intended, context: context) }
            }
        }
    }

    /// One call of a send: its own send id, so its own nonce and (secure, rich) its own content.
    private func call(_ call: Call, base: RequestValues, from: Int, to: Int, intended: Int64, context: RunContext) async {
        let id = context.signals.makeSendID(context.spec.shard)
        let run = context.spec.runID
        var values = base
        values.platform = call.platform.map(context.spec.api.platformName)
        values.trace = context.spec.traces.send(id)
        switch traffic.kind {
        case .plain:
            values.message = PushContent.nonceText(id, run: run)
        case .secure:
            values.message = PushContent.securePayload(send: id, recipient: context.spec.names.user(to), run: run)
        case .rich:
            values.message = PushContent.nonceText(id, run: run)
            values.image = Data(PushContent.securePayload(send: id, recipient: context.spec.names.user(to), run: run).utf8).base64EncodedString()
        }
        await perform(call.step, id: id, from: from, to: to, platforms: call.platforms, intended: intended, values: values, context: context)
    }

    private func perform(
        _ step: APIStep, id: Int, from: Int, to: Int, platforms: [Scenario.PlatformName], intended: Int64, values: RequestValues,
        context: RunContext
    ) async {
        let result = await context.runStep(step, values: values, http: context.services.backend, timeout: context.spec.scenario.timeouts.send, record: false)
        let now = context.now()
        let start = result.start ?? now
        let end = result.end ?? now
        // As for every operation: answers in the histograms, transport failures in errors.
        let answered = result.last != nil
        if !result.succeeded { context.emit(.error(.failed("send", RunContext.label(result.failure)), at: end)) }
        var contentID: String?
        if result.succeeded, let slot = step.contentID, slot < result.locals.count {
            contentID = result.locals[slot]?.string
        }
        var record = DeliveryLedger.Send(
            id: id, from: from, to: to, kind: traffic.kind, platforms: platforms, intended: intended, start: start, end: end,
            succeeded: result.succeeded, contentID: contentID
        )
        record.answered = answered
        context.emit(.send(record))
    }
}

/// Sends open right now, against a sender's limit.
final class InFlight: Sendable {
    private let count = Atomic<Int>(0)

    func enter(limit: Int) -> Bool {
        if count.add(1, ordering: .relaxed).newValue > limit {
            count.subtract(1, ordering: .relaxed)
            return false
        }
        return true
    }

    func leave() {
        count.subtract(1, ordering: .relaxed)
    }
}
