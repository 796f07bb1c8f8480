import PushFleetCore

extension DeliveryLedger {
    /// Judges every pair and every push (``DeliveryJudge``). `deadline` separates delivered from
    /// late; at most `incidentLimit` incidents of each outcome are kept. When listening stopped
    /// early (a run aborted without its drain) at `listeningEnded`, an expected pair whose
    /// deadline had not passed by then is indeterminate, not lost: its push may still have been
    /// on its way. With a `window`, only the sends that started in it are judged; with `devices`,
    /// only what befell those devices is counted (a network fault's share of the fleet).
    public func verdict(
        deadline: Duration, incidentLimit: Int = 1000, listeningEnded: Int64? = nil, window: Range<Int64>? = nil, devices: Set<Int>? = nil
    ) -> Verdict {
        let rest = DeliveryJudge.judge(
            self, deadline: deadline, incidentLimit: incidentLimit, listeningEnded: listeningEnded, window: window, devices: devices
        )
        // A window judges what is still held; runs judged in windows do not fold.
        return window == nil ? withFolds(rest, incidentLimit: incidentLimit) : rest
    }

    /// Which send each stored content id belongs to: the backend's answer says, or a device that
    /// fetched it found the send's nonce inside (an answer wins over a fetch). A fetch past its
    /// send's horizon teaches nothing: by then the send may have been folded.
    func contentOwners() -> [String: Int] {
        var owners: [String: Int] = [:]
        for send in sends.values { if let id = send.contentID { owners[id] = send.id } }
        let horizon = horizon?.nanoseconds
        for receipt in receipts {
            guard case .send(let id) = receipt.attribution, case .fetched = receipt.content, let content = receipt.contentID else { continue }
            if let horizon {
                if sends.isFolded(id) { continue }
                if let send = sends[id], receipt.time > Saturating.add(send.end, horizon) { continue }
            }
            owners[content] = owners[content] ?? id
        }
        return owners
    }

    /// Whether a succeeded `send` expects `device`, by what is recorded: a targeted platform, and
    /// the device eligible when the send started and unchanged while it was open.
    func expects(_ send: Send, _ device: Int) -> Bool {
        guard send.succeeded, send.targets(devices[device].platform) else { return false }
        let history = Self.ordered(transitions[device])
        return !Self.changed(history, within: send.start, send.end) && Self.eligible(history, at: send.start)
    }

    /// A device's changes in time order, each one a real change of state.
    static func ordered(_ changes: [Transition]) -> [Transition] {
        var result: [Transition] = []
        for change in changes.enumerated().sorted(by: { ($0.element.time, $0.offset) < ($1.element.time, $1.offset) }).map(\.element)
        where result.last?.eligible != change.eligible && !(result.isEmpty && !change.eligible) {
            result.append(change)
        }
        return result
    }

    static func eligible(_ history: [Transition], at time: Int64) -> Bool {
        history.last { $0.time <= time }?.eligible ?? false
    }

    /// Whether a change's span overlaps the send's span.
    static func changed(_ history: [Transition], within start: Int64, _ end: Int64) -> Bool {
        history.contains { $0.start <= end && $0.time >= start }
    }
}
