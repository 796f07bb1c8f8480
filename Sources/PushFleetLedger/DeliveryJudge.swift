import PushFleetCore

/// Judges a ledger's raw material into a ``DeliveryLedger/Verdict``, in named steps:
/// 1. **content owners**: which send each stored content id belongs to;
/// 2. **expectations**: who each send expected, and whose state changed while it was open;
/// 3. **receipts and rejections**, in time order, because the first event of a pair decides it;
/// 4. **close-out**: pairs nothing settled are lost (or indeterminate), probe leaks are counted.
///
/// Before the expectations the push service's reports are placed by pair (``placeTrail()``), so
/// that every lost, late and unverified pair is explained by where it went (``Ledger/Explanation``)
/// and counted in its platform's funnel (see DeliveryJudge+Hops.swift).
///
/// The material may be one process's ledger or several merged (``DeliveryLedger/merge(_:)``);
/// a `window` judges only the sends that started in it (a capacity step, a time slice), with
/// everything that names them wherever it falls, and the pushes that name no send when they
/// happened in it. Knowledge from before the window (registrations, dead tokens) still counts.
struct DeliveryJudge {
    typealias Ledger = DeliveryLedger

    struct Pair: Hashable {
        var send: Int
        var device: Int
    }

    enum Resolved {
        case send(Ledger.Send)
        /// A send of this run whose horizon had passed when the push came (folded or not).
        case pastHorizon(Int)
        case otherRun
        case unknown
    }

    private enum Event {
        case receipt(Ledger.Receipt)
        case rejection(Ledger.Rejection, knownAt: Int64?)

        var time: Int64 {
            switch self {
            case .receipt(let receipt): receipt.time
            case .rejection(let rejection, _): rejection.time
            }
        }
    }

    let ledger: Ledger
    let deadline: Int64
    private let incidentLimit: Int
    private let listeningEnded: Int64?
    private let window: Range<Int64>?
    /// Devices whose outcomes are counted; nil for all.
    private let devices: Set<Int>?
    /// A push this long after its send's answer is never credited (nil: no bound).
    private let horizon: Int64?
    /// Each device's changes in time order, made when a send first asks: a fold judges a few
    /// thousand sends of a fleet that may hold a million devices.
    private var history: [Int: [Ledger.Transition]] = [:]
    var verdict: Ledger.Verdict
    private var owners: [String: Int] = [:]
    /// The push service's reports, placed by pair (``placeTrail()``).
    var trail = TrailIndex()
    var expected = Set<Pair>()
    /// Pairs whose device changed state while the send was open, or whose send failed.
    private var unsure = Set<Pair>()
    /// Pairs whose first receipt or refusal has been judged.
    private var settled = Set<Pair>()
    private var unsureRefused = Set<Pair>()
    /// When each device received pushes it could not decrypt, each to explain one lost pair.
    var undecryptable: [Int: [(time: Int64, used: Bool)]] = [:]

    /// Judges `ledger`. `deadline` separates delivered from late; at most `incidentLimit`
    /// incidents of each outcome are kept. When listening stopped early at `listeningEnded`, an
    /// expected pair whose deadline had not passed by then is indeterminate, not lost.
    static func judge(
        _ ledger: Ledger, deadline: Duration, incidentLimit: Int, listeningEnded: Int64?, window: Range<Int64>? = nil, devices: Set<Int>? = nil
    ) -> Ledger.Verdict {
        judged(
            ledger, deadline: deadline, incidentLimit: incidentLimit, listeningEnded: listeningEnded, window: window, devices: devices, sparse: false
        ).verdict
    }

    /// As ``judge(_:deadline:incidentLimit:listeningEnded:window:)``, with the per-user counts
    /// apart and only for the users counted (the verdict's `byUser` left empty): a fold judges
    /// a few thousand sends, not a row for every user of the fleet.
    static func judgeSparse(_ ledger: Ledger, deadline: Duration, incidentLimit: Int) -> (verdict: Ledger.Verdict, byUser: [Int: Ledger.Counts]) {
        judged(ledger, deadline: deadline, incidentLimit: incidentLimit, listeningEnded: nil, window: nil, devices: nil, sparse: true)
    }

    private static func judged(
        _ ledger: Ledger, deadline: Duration, incidentLimit: Int, listeningEnded: Int64?, window: Range<Int64>?, devices: Set<Int>?, sparse: Bool
    ) -> (verdict: Ledger.Verdict, byUser: [Int: Ledger.Counts]) {
        var judge = DeliveryJudge(
            ledger, deadline: deadline.nanoseconds, incidentLimit: incidentLimit, listeningEnded: listeningEnded, window: window, devices: devices,
            sparse: sparse
        )
        judge.findContentOwners()
        judge.placeTrail()
        judge.expectations()
        judge.receiptsAndRejections()
        judge.closeOut()
        judge.verdict.incidents.sort { ($0.time ?? .max, $0.send ?? 0, $0.device ?? 0) < ($1.time ?? .max, $1.send ?? 0, $1.device ?? 0) }
        return (judge.verdict, judge.sparseByUser ?? [:])
    }

    private init(
        _ ledger: Ledger, deadline: Int64, incidentLimit: Int, listeningEnded: Int64?, window: Range<Int64>?, devices: Set<Int>?, sparse: Bool
    ) {
        self.ledger = ledger
        self.deadline = deadline
        self.incidentLimit = incidentLimit
        self.listeningEnded = listeningEnded
        self.window = window
        self.devices = devices
        horizon = ledger.horizon?.nanoseconds
        verdict = Ledger.Verdict(byUser: sparse ? [] : Array(repeating: Ledger.Counts(), count: ledger.devicesOfUser.count))
        sparseByUser = sparse ? [:] : nil
    }

    /// Per-user counts when judging sparsely.
    private var sparseByUser: [Int: Ledger.Counts]?

    // MARK: Steps

    /// Which send each stored content id belongs to (``DeliveryLedger/contentOwners()``).
    private mutating func findContentOwners() {
        owners = ledger.contentOwners()
    }

    /// Who each send expected, and who was indeterminate.
    private mutating func expectations() {
        for send in ledger.sends.values where judged(send) {
            countSend(send)
            for device in ledger.devicesOfUser[send.to] where send.targets(ledger.devices[device].platform) {
                let pair = Pair(send: send.id, device: device)
                let changes = orderedChanges(device)
                if !send.succeeded || Ledger.changed(changes, within: send.start, send.end) {
                    unsure.insert(pair)
                } else if Ledger.eligible(changes, at: send.start) {
                    expected.insert(pair)
                    count(device, \.expected)
                    reached(device, .expected)
                }
            }
        }
    }

    /// Receipts and refusals in time order: the first event of a pair decides it.
    private mutating func receiptsAndRejections() {
        let deadSince = deadTokenPushes()
        var events: [Event] = []
        events.reserveCapacity(ledger.receipts.count + ledger.rejections.count)
        for receipt in ledger.receipts { events.append(.receipt(receipt)) }
        for (index, rejection) in ledger.rejections.enumerated() {
            events.append(.rejection(rejection, knownAt: deadSince[index]))
        }
        // In place: the events of a large run are the judge's largest transient memory.
        events.sort { $0.time < $1.time }
        for event in events {
            switch event {
            case .receipt(let receipt): judge(receipt)
            case .rejection(let rejection, let knownAt): judge(rejection, knownAt: knownAt)
            }
        }
    }

    /// Expected pairs that nothing settled, the indeterminate ones, and probe leaks.
    private mutating func closeOut() {
        for pair in unsure where !unsureRefused.contains(pair) {
            // A send that failed and still reached its device: recovered, not a guess.
            if settled.contains(pair), let send = ledger.sends[pair.send], !send.succeeded {
                count(pair.device, \.recovered)
                incident(.recovered, send: pair.send, device: pair.device, time: nil, "the send failed and its push arrived")
            } else {
                count(pair.device, \.indeterminate)
            }
        }
        // In send order: evidence about a device (an unreadable push, a report matched by token)
        // explains its earliest lost pair, the same on every run.
        for pair in expected.filter({ !settled.contains($0) }).sorted(by: { ($0.send, $0.device) < ($1.send, $1.device) }) {
            if let listeningEnded, let send = ledger.sends[pair.send], send.start + deadline > listeningEnded {
                count(pair.device, \.indeterminate)
                continue
            }
            let (explanation, push) = explainLost(pair)
            // Held and given up as the platform promises (a newer push, FCM's discarded hold):
            // replaced, its own outcome.
            let outcome = explanation.outcome
            count(pair.device, outcome == .replaced ? \.replaced : \.lost)
            incident(outcome, send: pair.send, device: pair.device, time: nil, explanation.cause.phrase, explanation: explanation, push: push)
        }
        for leak in ledger.probeLeaks where inWindow(leak.time) {
            count(leak.device, \.leaks)
            incident(.leak, send: nil, device: leak.device, time: leak.time, leak.detail)
        }
    }

    // MARK: One receipt, one refusal

    private mutating func judge(_ receipt: Ledger.Receipt) {
        let device = receipt.device
        let failure: String? = if case .failed(let reason) = receipt.content { reason } else { nil }
        if case .undecryptable = receipt.attribution {
            guard inWindow(receipt.time) else { return }
            count(device, \.undecryptable)
            undecryptable[device, default: []].append((receipt.time, false))
            incident(.undecryptable, send: nil, device: device, time: receipt.time, failure ?? "")
            return
        }
        let send: Ledger.Send
        switch resolve(receipt.attribution, at: receipt.time) {
        case .pastHorizon(let id):
            guard inWindow(receipt.time) else { return }
            count(device, \.stale)
            incident(.stale, send: id, device: device, time: receipt.time, "arrived past the ledger's horizon for its send")
            return
        case .otherRun:
            guard inWindow(receipt.time) else { return }
            count(device, \.stale)
            incident(.stale, send: nil, device: device, time: receipt.time, "names a send of another run")
            return
        case .unknown:
            guard inWindow(receipt.time) else { return }
            if let failure {
                count(device, \.unverified)
                incident(.unverified, send: nil, device: device, time: receipt.time, "content of unknown send, fetch \(failure)")
            } else {
                misdelivered(device, send: nil, at: receipt.time, "names no send of this run")
            }
            return
        case .send(let found):
            guard judged(found) else { return }
            send = found
        }
        if receipt.time < send.start {
            count(device, \.stale)
            incident(.stale, send: send.id, device: device, time: receipt.time, "received before its send started")
            return
        }
        // Any successful read by someone other than the recipient is a leak.
        if receipt.contentTime != nil && ledger.devices[device].user != send.to {
            count(device, \.leaks)
            incident(.leak, send: send.id, device: device, time: receipt.contentTime, "fetched another user's notification")
        }
        let pair = Pair(send: send.id, device: device)
        guard settled.insert(pair).inserted else {
            count(device, \.duplicates)
            incident(.duplicate, send: send.id, device: device, time: receipt.time)
            return
        }
        if unsure.contains(pair) { return }
        guard expected.contains(pair) else {
            misdelivered(device, send: send.id, at: receipt.time, failure.map { "fetch \($0)" } ?? "")
            return
        }
        if let failure {
            count(device, \.unverified)
            reached(device, .received)
            let explanation = explain(.unverified, device: device, hop: .fetch, cause: .fetchFailed, reason: failure)
            incident(.unverified, send: send.id, device: device, time: receipt.time, "fetch \(failure)", explanation: explanation)
            return
        }
        let raw = receipt.time - send.start
        let late = raw > deadline
        count(device, late ? \.late : \.delivered)
        reached(device, .inHand)
        let hops = receipt.path.map {
            Ledger.HopTimes.of($0, start: send.start, intended: send.intended, received: receipt.time, inHand: receipt.contentTime)
        }
        if late {
            let explanation = explainLate(device, path: receipt.path, hops: hops)
            // Accepted, then written: the push service's part, where the hops put it.
            let push = hops.map { hops in
                let accepted = send.start + hops.backend + (hops.hub ?? 0)
                return Ledger.PushPart(step: .written, handedAt: accepted, stepAt: accepted + hops.pushService, context: hops.context)
            }
            incident(.late, send: send.id, device: device, time: receipt.time, "after \(raw / 1_000_000) ms", explanation: explanation, push: push)
        }
        guard devices?.contains(device) ?? true else { return }
        verdict.deliveries.append(
            Ledger.Delivery(
                send: send.id, device: device, receivedAt: receipt.time, raw: raw, corrected: receipt.time - send.intended,
                endToEndRaw: receipt.contentTime.map { $0 - send.start }, endToEndCorrected: receipt.contentTime.map { $0 - send.intended },
                late: late, hops: hops
            )
        )
    }

    /// After the backend was told (see ``deadTokenPushes()``), a push to the token is its own
    /// doing; before, it could not know.
    private mutating func judge(_ rejection: Ledger.Rejection, knownAt: Int64?) {
        let device = rejection.device
        switch resolve(rejection.attribution, at: rejection.time) {
        case .otherRun:
            guard inWindow(rejection.time) else { return }
            count(device, \.stale)
            incident(.stale, send: nil, device: device, time: rejection.time, "refused push names a send of another run")
        case .unknown, .pastHorizon:
            guard inWindow(rejection.time) else { return }
            deadToken(device, send: nil, at: rejection.time, knownAt: knownAt)
        case .send(let send):
            guard judged(send) else { return }
            let targeted = send.to == ledger.devices[device].user && send.targets(ledger.devices[device].platform)
            let pair = Pair(send: send.id, device: device)
            if !targeted {
                misdelivered(device, send: send.id, at: rejection.time, "refused as a dead token")
            } else if !settled.insert(pair).inserted {
                count(device, \.duplicates)
                incident(.duplicate, send: send.id, device: device, time: rejection.time, "refused as a dead token")
            } else {
                if unsure.contains(pair) { unsureRefused.insert(pair) }
                deadToken(device, send: send.id, at: rejection.time, knownAt: knownAt)
            }
        }
    }

    private mutating func deadToken(_ device: Int, send: Int?, at time: Int64, knownAt: Int64?) {
        if let send, expected.contains(Pair(send: send, device: device)) { reached(device, .handed) }
        if knownAt != nil {
            count(device, \.sentToDeadToken)
            incident(.sentToDeadToken, send: send, device: device, time: time, "after the backend was told")
        } else {
            count(device, \.unregistered)
        }
    }

    private mutating func misdelivered(_ device: Int, send: Int?, at time: Int64, _ detail: String) {
        count(device, \.misdelivered)
        verdict.misdeliveredAt.append(time)
        // The push service delivers to the token it was given: the backend addressed this one.
        let token = ledger.devices[device].token.map { "addressed to token \($0)" }
        incident(.misdelivered, send: send, device: device, time: time, [detail, token].compactMap { $0?.isEmpty == false ? $0 : nil }.joined(separator: "; "))
    }

    // MARK: Helpers

    private mutating func orderedChanges(_ device: Int) -> [Ledger.Transition] {
        if let known = history[device] { return known }
        let ordered = Ledger.ordered(ledger.transitions[device])
        history[device] = ordered
        return ordered
    }

    /// Whether the send is judged here (every send, without a window).
    func judged(_ send: Ledger.Send) -> Bool {
        window?.contains(send.start) ?? true
    }

    private func inWindow(_ time: Int64) -> Bool {
        window?.contains(time) ?? true
    }

    /// What a push that came at `time` names. Past the horizon, a push that names its send is
    /// never credited, and one that names only content is taken as content the run does not
    /// know: once a send is folded, its content ids are forgotten.
    func resolve(_ attribution: Ledger.Attribution, at time: Int64) -> Resolved {
        switch attribution {
        case .send(let id):
            guard let send = ledger.sends[id] else { return ledger.sends.isFolded(id) ? .pastHorizon(id) : .unknown }
            return past(send, time) ? .pastHorizon(id) : .send(send)
        case .content(let content):
            guard let send = owners[content].flatMap({ ledger.sends[$0] }), !past(send, time) else { return .unknown }
            return .send(send)
        case .otherRun: return .otherRun
        case .unattributable, .undecryptable: return .unknown
        }
    }

    private func past(_ send: Ledger.Send, _ time: Int64) -> Bool {
        guard let horizon else { return false }
        return time > Saturating.add(send.end, horizon)
    }

    mutating func count(_ device: Int, _ path: WritableKeyPath<Ledger.Counts, Int>) {
        if let devices, !devices.contains(device) { return }
        verdict.total[keyPath: path] += 1
        let user = ledger.devices[device].user
        if sparseByUser != nil {
            sparseByUser![user, default: Ledger.Counts()][keyPath: path] += 1
        } else {
            verdict.byUser[user][keyPath: path] += 1
        }
        verdict.byPlatform[ledger.devices[device].platform, default: Ledger.Counts()][keyPath: path] += 1
    }

    private mutating func incident(
        _ outcome: Ledger.Outcome, send: Int?, device: Int?, time: Int64?, _ detail: String = "", explanation: Ledger.Explanation? = nil,
        push: Ledger.PushPart? = nil
    ) {
        if let devices, let device, !devices.contains(device) { return }
        verdict.incidentTotals[outcome, default: 0] += 1
        if let explanation { verdict.explanations[explanation, default: 0] += 1 }
        guard verdict.incidentTotals[outcome]! <= incidentLimit else { return }
        verdict.incidents.append(
            Ledger.Incident(outcome: outcome, send: send, device: device, time: time, detail: detail, explanation: explanation, push: push)
        )
    }
}
