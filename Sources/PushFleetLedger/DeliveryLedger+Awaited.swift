import PushFleetCore

extension DeliveryLedger {
    /// The pairs still awaited, kept up to date as material is recorded, so a run's drain can
    /// ask "is anything outstanding?" without judging the whole ledger.
    ///
    /// A pair is awaited once its send is recorded, succeeded, and found the device eligible and
    /// unchanged by what the ledger knows then; a receipt or refusal settles it. Material that
    /// arrives out of order can make this differ from the judge's count (a registration recorded
    /// after a send it preceded), so a count of zero is a reason to judge, not a verdict.
    struct Awaited: Sendable {
        /// Awaited sends, by device.
        var byDevice: [Int: Set<Int>] = [:]
        var count = 0
        /// Receipts and refusals that came before their send was recorded (a push can beat the
        /// backend's answer): by send, the device and the latest time.
        var early: [Int: [Int: Int64]] = [:]
        /// Which send stored content belongs to, as far as known yet; made only once a push names
        /// content alone (its fetch failed), so a healthy run keeps no index of its content ids.
        var owners: [String: Int]?
        /// Pushes naming content no known send owns yet.
        var unplaced: [(content: String, device: Int, time: Int64)] = []

        mutating func remove(send: Int, device: Int) {
            guard byDevice[device]?.remove(send) != nil else { return }
            count -= 1
            if byDevice[device]?.isEmpty == true { byDevice[device] = nil }
        }
    }

    /// Pairs expected by what is recorded so far and not yet settled; nil while a push names
    /// content the ledger cannot place yet, when only a judgement can tell.
    public var awaited: Int? {
        awaiting.unplaced.isEmpty ? awaiting.count : nil
    }

    mutating func awaitSend(_ send: Send) {
        let early = awaiting.early.removeValue(forKey: send.id) ?? [:]
        if send.succeeded {
            for device in devicesOfUser[send.to] where expects(send, device) {
                if let time = early[device], time >= send.start { continue }
                if awaiting.byDevice[device, default: []].insert(send.id).inserted { awaiting.count += 1 }
            }
        }
        // Last, so pushes that named its content before it was known settle what it awaits.
        if let content = send.contentID { learnOwner(content, send: send.id) }
    }

    /// A receipt or refusal of `attribution` at `device`.
    mutating func settle(_ attribution: Attribution, device: Int, at time: Int64) {
        switch attribution {
        case .send(let id): settle(send: id, device: device, at: time)
        case .content(let content):
            if let owner = owner(of: content) {
                settle(send: owner, device: device, at: time)
            } else {
                awaiting.unplaced.append((content, device, time))
            }
        case .otherRun, .unattributable, .undecryptable: break
        }
    }

    /// A receipt that fetched content naming its send teaches the content's owner.
    mutating func learnOwner(from receipt: Receipt) {
        if awaiting.owners != nil, case .send(let id) = receipt.attribution, case .fetched = receipt.content,
            let content = receipt.contentID, awaiting.owners?[content] == nil
        {
            learnOwner(content, send: id)
        }
    }

    /// The send that owns `content`, indexing the ledger's content ids the first time it is asked.
    private mutating func owner(of content: String) -> Int? {
        if awaiting.owners == nil { awaiting.owners = contentOwners() }
        return awaiting.owners?[content]
    }

    /// The device's eligibility changed: the sends it awaits are checked again.
    mutating func recheckAwaited(_ device: Int) {
        guard let awaited = awaiting.byDevice[device] else { return }
        let history = Self.ordered(transitions[device])
        for id in awaited {
            guard let send = sends[id] else { continue }
            if Self.changed(history, within: send.start, send.end) || !Self.eligible(history, at: send.start) {
                awaiting.remove(send: id, device: device)
            }
        }
    }

    private mutating func settle(send id: Int, device: Int, at time: Int64) {
        guard let send = sends[id] else {
            // A folded send awaits nothing.
            if sends.isFolded(id) { return }
            awaiting.early[id, default: [:]][device] = max(awaiting.early[id]?[device] ?? .min, time)
            return
        }
        // A push before its send started is stale: it settles nothing.
        if time >= send.start { awaiting.remove(send: id, device: device) }
    }

    private mutating func learnOwner(_ content: String, send: Int) {
        guard awaiting.owners != nil else { return }
        awaiting.owners?[content] = send
        guard awaiting.unplaced.contains(where: { $0.content == content }) else { return }
        let placed = awaiting.unplaced.filter { $0.content == content }
        awaiting.unplaced.removeAll { $0.content == content }
        for push in placed { settle(send: send, device: push.device, at: push.time) }
    }
}
