import PushFleetCore

extension DeliveryLedger {
    /// Why ledgers cannot be joined.
    public struct MergeError: Error, Equatable, CustomStringConvertible {
        public var description: String
    }

    /// One ledger holding the material of several that recorded parts of one run (the same
    /// fleet plan, so the same devices; send ids unique across them). Judging the result judges
    /// pairs whose send was recorded in one part and whose receipt in another exactly as if one
    /// process had seen both. Instants must be on one time line.
    public static func merged(_ parts: [DeliveryLedger]) throws(MergeError) -> DeliveryLedger {
        guard let first = parts.first else { return DeliveryLedger(users: 0) }
        for (index, part) in parts.enumerated().dropFirst() {
            guard part.devicesOfUser.count == first.devicesOfUser.count, part.devices.count == first.devices.count,
                zip(part.devices, first.devices).allSatisfy({ $0.user == $1.user && $0.platform == $1.platform })
            else {
                throw MergeError(description: "part \(index + 1) has another fleet than part 1 (users, devices or platforms differ)")
            }
        }
        var merged = DeliveryLedger(users: first.devicesOfUser.count)
        for device in first.devices { _ = merged.addDevice(device) }
        var seen = Set<Int>()
        for part in parts {
            for id in part.sends.keys where !seen.insert(id).inserted {
                throw MergeError(description: "send \(id) was recorded by more than one part")
            }
        }
        for part in parts {
            for (device, changes) in part.transitions.enumerated() {
                for change in changes { merged.setEligible(device, change.eligible, at: change.time, since: change.start) }
            }
        }
        for part in parts {
            for send in part.sends.values.sorted(by: { $0.id < $1.id }) { merged.record(send) }
        }
        // Rejections are recorded as they are: recording one again would repeat the eligibility
        // change its part already holds.
        for part in parts {
            for receipt in part.receipts { merged.record(receipt) }
            for rejection in part.rejections {
                merged.rejections.append(rejection)
                merged.settle(rejection.attribution, device: rejection.device, at: rejection.time)
            }
            for leak in part.probeLeaks { merged.record(leak) }
        }
        merged.trail = PushTrail.merged(parts.map(\.trail))
        return merged
    }
}

extension DeliveryLedger.PushTrail {
    /// The reports of several parts of one run, as if one had recorded them all: a push one part
    /// saw received is not kept from another's reports; the view is watched only if every part's
    /// was, from the latest start, with every part's gaps.
    static func merged(_ parts: [Self]) -> Self {
        var merged = Self()
        merged.reader = parts.lazy.compactMap(\.reader).first
        for part in parts {
            for (push, record) in part.open where merged.open[push] == nil || record.step.isFinal { merged.open[push] = record }
            merged.receivedEarly.formUnion(part.receivedEarly)
            merged.hubNotes += part.hubNotes
            merged.viaHub = merged.viaHub || part.viaHub
            merged.reports += part.reports
        }
        for push in merged.receivedEarly where merged.open[push] != nil {
            merged.open[push] = nil
            merged.receivedEarly.remove(push)
        }
        var since = Int64.min
        var gaps: [Range<Int64>] = []
        for part in parts {
            switch part.view {
            case .unknown:
                merged.view = part.view
                return merged
            case .watched(let start, let own):
                since = max(since, start)
                gaps += own
            }
        }
        if !parts.isEmpty { merged.view = .watched(since: since, gaps: gaps.sorted { $0.lowerBound < $1.lowerBound }) }
        return merged
    }
}
