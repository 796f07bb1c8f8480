import Foundation
import NIOCore
import NIOHTTP1
import PushFleetCore
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

    func run(_ context: RunContext, trafficStart: Int64) async {
        let instants = traffic.profile.instants()
        var rng = SplitMix64(seed: context.scenario.seed ^ stableHash(traffic.name, seed: UInt64(index)))
        let inFlight = InFlight()
        let base = trafficStart + traffic.start.nanoseconds
        await withDiscardingTaskGroup { group in
            for offset in instants {
                let intended = base + offset
                guard await context.sleep(until: intended) else { break }
                let (from, to) = choose(&rng, users: context.plan.users)
                guard inFlight.enter(limit: traffic.maxInFlight) else {
                    context.emit(.sendDropped(at: context.now()))
                    continue
                }
                group.addTask {
                    await send(from: from, to: to, intended: intended, context: context)
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

    private func send(from: Int, to: Int, intended: Int64, context: RunContext) async {
        let sender = context.scenario.fleet.names.user(from)
        let recipient = context.scenario.fleet.names.user(to)
        let run = context.runID
        // A user name is data, not query syntax (`bob&x=1` must not add a parameter).
        let toTag = Self.queryValue(recipient)
        switch traffic.kind {
        case .plain:
            // One call per platform, as the seed's app does with its switches, all at once.
            await withDiscardingTaskGroup { group in
                for platform in traffic.platforms {
                    group.addTask {
                        let id = context.makeSendID()
                        let body = try! JSONEncoder().encode(PushContent.nonceText(id, run: run))
                        await perform(
                            id: id, from: from, to: to, platforms: [platform], intended: intended,
                            path: "/api/notifications?pns=\(platform.rawValue)&to_tag=\(toTag)", body: body, sender: sender,
                            context: context
                        )
                    }
                }
            }
        case .secure:
            let id = context.makeSendID()
            let body = try! JSONEncoder().encode(PushContent.securePayload(send: id, recipient: recipient, run: run))
            await perform(
                id: id, from: from, to: to, platforms: Scenario.PlatformName.allCases, intended: intended,
                path: "/api/notifications/secure?to_tag=\(toTag)", body: body, sender: sender, context: context
            )
        case .rich:
            let id = context.makeSendID()
            let image = Data(PushContent.securePayload(send: id, recipient: recipient, run: run).utf8).base64EncodedString()
            let body = try! JSONEncoder().encode(
                RichNotificationRequest(message: PushContent.nonceText(id, run: run), image: image, contentType: "image/png")
            )
            await perform(
                id: id, from: from, to: to, platforms: Scenario.PlatformName.allCases, intended: intended,
                path: "/api/notifications/rich?to_tag=\(toTag)", body: body, sender: sender, context: context
            )
        }
    }

    private func perform(
        id: Int, from: Int, to: Int, platforms: [Scenario.PlatformName], intended: Int64, path: String, body: Data,
        sender: String, context: RunContext
    ) async {
        let result = await context.credentials.withAuth(sender, context: context) { auth in
            await context.backend.exchange(.POST, path, authorization: auth, body: body, timeout: context.scenario.timeouts.send)
        }
        let start: Int64
        let end: Int64
        let succeeded: Bool
        var contentID: String?
        var answered = true
        switch result {
        case .success(let exchange):
            (start, end, succeeded) = (exchange.start, exchange.end, exchange.succeeded)
            if succeeded && traffic.kind != .plain { contentID = Self.contentID(in: exchange) }
            if !succeeded { context.emit(.error("send:status_\(exchange.status)", at: end)) }
        case .failure(let error):
            (start, end, succeeded) = (error.start, error.end, false)
            answered = false
            context.emit(.error("send:\(error.label)", at: end))
        }
        var record = DeliveryLedger.Send(
            id: id, from: from, to: to, kind: traffic.kind, platforms: platforms, intended: intended, start: start, end: end,
            succeeded: succeeded, contentID: contentID
        )
        record.answered = answered
        context.emit(.send(record))
    }
}

extension TrafficSender {
    static let queryAllowed = CharacterSet.alphanumerics.union(CharacterSet(charactersIn: "-._~"))

    static func queryValue(_ text: String) -> String {
        // Most names need no escaping; skip Foundation's encoder for them (once per send).
        let plain = text.utf8.allSatisfy { byte in
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte | 0x20) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
        }
        if plain { return text }
        return text.addingPercentEncoding(withAllowedCharacters: queryAllowed) ?? text
    }

    /// The stored content's id when the backend's answer names it (`{"id": "…"}`, as the
    /// reference backend answers): it ties a secure push whose fetch fails to its send.
    static func contentID(in exchange: HTTPExchange) -> String? {
        guard exchange.body.readableBytes <= 64 * 1024, exchange.body.readableBytesView.first == UInt8(ascii: "{"),
            let answer = try? JSONDecoder().decode(ContentAnswer.self, from: Data(exchange.body.readableBytesView))
        else { return nil }
        return answer.id ?? answer.Id
    }

    /// Only the id of a send's answer; the rest is the backend's business.
    private struct ContentAnswer: Decodable {
        var id: String?
        var Id: String?
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
