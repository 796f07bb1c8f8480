public import PushFleetCore

/// Where pairs went wrong, and how long each hop took: the judge's explanation of every lost,
/// late and unverified pair by the push service's reports (``PushTrail``) and the paths that came
/// with receipts.
extension DeliveryLedger {
    /// The hops of a push, in order: the backend (send start → the hub or push service has it),
    /// the hub (→ the push service has it), the push service (→ written to the device's socket),
    /// the device (→ received), the fetch of secure or rich content (→ in hand).
    public enum Hop: String, Sendable, Codable, CaseIterable {
        case backend, hub
        case pushService = "push_service"
        case device, fetch
        /// The run could not see: the push service is not pushfleet's, or its reports had a gap.
        case unknown

        /// How a report names it.
        public var label: String {
            switch self {
            case .backend: "backend"
            case .hub: "hub"
            case .pushService: "push service"
            case .device: "device"
            case .fetch: "fetch"
            case .unknown: "unknown"
            }
        }
    }

    /// What happened at the hop (see docs/reports.md, "Why lost").
    public enum Cause: String, Sendable, Codable, CaseIterable {
        /// The backend accepted the send and pushed nothing for the device.
        case notPushed = "not_pushed"
        /// The backend accepted the send and sent nothing to the hub for it.
        case notToHub = "not_to_hub"
        /// The hub took the send and pushed nothing to the device (no registration of its token
        /// was selected).
        case hubSkipped = "hub_skipped"
        /// The backend pushed it to a token that is no device's of this run.
        case otherToken = "other_token"
        /// The push service refused it (status and reason as the backend was answered).
        case refused
        /// An injected drop fault dropped it.
        case dropped
        /// The device was offline and the hold for offline devices was full.
        case holdFull = "hold_full"
        /// The device was offline and the push asked not to be stored.
        case notStored = "not_stored"
        /// Still held for its offline device when the run ended.
        case held
        /// Held for its offline device, and expired.
        case expired
        /// Held, and replaced by a newer push for the device (one is kept per device).
        case replaced
        /// Held, and discarded with the rest of the device's hold past FCM's 100 (as FCM promises, and says).
        case discarded
        /// Held, and discarded when the device's token was unregistered.
        case unregistered
        /// Handed to the device's connection, which closed before the push went out.
        case disconnected
        /// Accepted, and not yet written to the device when the run ended.
        case inFlight = "in_flight"
        /// Written to the device's socket and never received.
        case notReceived = "not_received"
        /// Received, and fetching its content failed (the reason says how).
        case fetchFailed = "fetch_failed"
        /// A browser received a push for it that did not decrypt with its subscription's keys.
        case undecryptable
        /// Late: this hop took longest.
        case slow
        /// Late: held for its device while it was offline.
        case heldOffline = "held_offline"
        /// Late: an injected latency fault held it back.
        case delayed
        /// Not watched, or the reports had a gap.
        case unwatched

        /// Words for a report.
        public var phrase: String {
            switch self {
            case .notPushed: "the backend accepted the send but pushed nothing for the device"
            case .notToHub: "the backend accepted the send but sent nothing to the hub"
            case .hubSkipped: "the hub took the send but pushed nothing to the device"
            case .otherToken: "pushed to a token that is no device's"
            case .refused: "refused by the push service"
            case .dropped: "dropped by an injected fault"
            case .holdFull: "device offline and the hold was full"
            case .discarded: "held for the offline device and discarded with its hold past 100 pushes (FCM's promise; the app is told)"
            case .notStored: "device offline and the push asked not to be stored"
            case .held: "still held for the offline device at the end"
            case .expired: "held for the offline device and expired"
            case .replaced: "held for the offline device and replaced by a newer push"
            case .unregistered: "held, then the device's token was unregistered"
            case .disconnected: "the device's connection closed before the push went out"
            case .inFlight: "accepted, not yet written to the device at the end"
            case .notReceived: "written to the device's socket, never received"
            case .fetchFailed: "received, fetching its content failed"
            case .undecryptable: "received, and it did not decrypt with the subscription's keys"
            case .slow: "slow"
            case .heldOffline: "held while the device was offline"
            case .delayed: "held back by an injected latency fault"
            case .unwatched: "not seen: the push service is not pushfleet's or its reports had a gap"
            }
        }

        /// What to look at for it, when there is a usual suspect (a refusal's status says which).
        public func advice(status: Int?, hop: Hop) -> String? {
            switch self {
            case .refused:
                switch status {
                case 401, 403: "check the backend's push credentials"
                case 429, 406: "the push service throttled the backend: it should send slower and retry"
                case 413: "the backend's pushes are too large"
                case 400, 404, 410: "check the tokens and payloads the backend sends"
                default: nil
                }
            case .notPushed: "check how the backend finds the user's devices (tags, registrations), and whether its pushes reach the push service (its errors, a fault on its link)"
            case .notToHub: "check the backend's sends to the hub"
            case .hubSkipped: "check the registrations and tags the backend keeps in the hub"
            case .otherToken: "the backend pushed to tokens no device has: check its registrations"
            case .dropped, .delayed: "the scenario's push-service fault"
            case .held, .expired, .notStored, .holdFull, .replaced, .discarded, .unregistered, .heldOffline: "devices were offline (disconnect or network faults, or devices that left)"
            case .notReceived, .disconnected: "see the gateway and connect errors"
            case .fetchFailed: "the backend's fetch failed for the recipient"
            case .undecryptable: "check the keys the backend encrypts Web Push with (the subscription's p256dh and auth)"
            case .inFlight: "the run ended before the push service wrote them: a longer grace shows whether they arrive"
            case .slow:
                switch hop {
                case .backend: "the backend is slow to hand pushes to the push service"
                case .hub: "the hub is slow to hand pushes to the push service"
                case .pushService: "the push service is slow to write to devices"
                case .device: "the fleet is slow to read its sockets: see whether the generator was saturated"
                case .fetch, .unknown: nil
                }
            case .unwatched: "run the push service as pushfleet's (embedded or pushfleet serve) to see where"
            }
        }
    }

    /// One explanation of a lost, late or unverified pair.
    public struct Explanation: Hashable, Sendable {
        public var outcome: Outcome
        public var hop: Hop
        public var cause: Cause
        public var platform: Scenario.PlatformName
        /// A refusal's status and reason, or a fetch's failure (`status_404`).
        public var status: Int?
        public var reason: String?
        /// Matched to its pair by the device's token and the time, because the push named no
        /// send the run knew (content whose id no answer or fetch gave).
        public var byToken: Bool

        public init(
            outcome: Outcome, hop: Hop, cause: Cause, platform: Scenario.PlatformName, status: Int? = nil, reason: String? = nil, byToken: Bool = false
        ) {
            self.outcome = outcome
            self.hop = hop
            self.cause = cause
            self.platform = platform
            self.status = status
            self.reason = reason
            self.byToken = byToken
        }

        /// `apns 403 InvalidProviderToken`, `fcm`, `wns status_404`.
        public var detail: String { Self.detail(platform: platform.rawValue, status: status, reason: reason) }

        /// The platform, then the status and reason when there are any; a reason in words (WNS
        /// describes its refusals in sentences) is quoted.
        public static func detail(platform: String, status: Int?, reason: String?) -> String {
            let reason = reason.map { $0.contains(where: \.isWhitespace) ? "\"\($0)\"" : $0 }
            return ([platform] + [status.map(String.init), reason].compactMap { $0 }).joined(separator: " ")
        }
    }

    /// Per platform: the sends that targeted it, and its expected pairs by the furthest point they
    /// reached. The push service's stages are nil when it was not watched.
    public struct Funnel: Sendable, Equatable, Codable {
        /// Sends that targeted the platform.
        public var sends = 0
        /// Of them, answered with success by the backend.
        public var sendsAccepted = 0
        /// (send, device) pairs expected on the platform.
        public var expected = 0
        /// Pairs whose push reached the push service (refused or accepted).
        public var handed: Int?
        /// Pairs whose push the push service accepted.
        public var accepted: Int?
        /// Pairs whose push was written to the device's socket.
        public var written: Int?
        /// Pairs whose push the device received (in time or late).
        public var received = 0
        /// Pairs in hand: received, and for secure or rich sends the content fetched.
        public var inHand = 0

        public init() {}
    }

    /// How long each hop of one delivered push took, in nanoseconds on the run's clock. The hops
    /// add up to the delivery latency exactly (``total``), and with the fetch to end to end.
    public struct HopTimes: Sendable, Equatable {
        /// Send start → the hub or the push service has it.
        public var backend: Int64
        /// The same from the send's intended start.
        public var backendCorrected: Int64
        /// The hub took it → the push service has it.
        public var hub: Int64?
        /// The push service has it → written to the device's socket.
        public var pushService: Int64
        /// Written → received.
        public var device: Int64
        /// Received → content in hand (secure and rich).
        public var fetch: Int64?
        /// The provider request's trace context, when it carried one.
        public var context: PushContext? = nil

        /// Send start → received.
        public var total: Int64 { backend + (hub ?? 0) + pushService + device }

        /// The hop that took longest to receipt.
        public var longest: Hop {
            var best: (Hop, Int64) = (.backend, backend)
            if let hub, hub > best.1 { best = (.hub, hub) }
            if pushService > best.1 { best = (.pushService, pushService) }
            if device > best.1 { best = (.device, device) }
            return best.0
        }

        /// The hops of a receipt at `received` for a send that started at `start` (intended at
        /// `intended`). Each instant is held between the one before it and the receipt, so clocks
        /// a little apart (the push service's wall clock moved onto the run's) never give a
        /// negative hop and the hops always add up.
        public static func of(_ path: PushPath, start: Int64, intended: Int64, received: Int64, inHand: Int64?) -> HopTimes {
            func held(_ value: Int64, after low: Int64) -> Int64 { min(max(value, low), max(received, low)) }
            let hubAt = path.hubAt(receivedAt: received).map { held($0, after: start) }
            let accepted = held(path.acceptedAt(receivedAt: received), after: hubAt ?? start)
            let written = held(path.writtenAt(receivedAt: received) ?? accepted, after: accepted)
            let end = max(received, written)
            let backend = (hubAt ?? accepted) - start
            return HopTimes(
                backend: backend, backendCorrected: backend + (start - intended), hub: hubAt.map { accepted - $0 }, pushService: written - accepted,
                device: end - written, fetch: inHand.map { max(0, $0 - end) }, context: path.context
            )
        }
    }
}
