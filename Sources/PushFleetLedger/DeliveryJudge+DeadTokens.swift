import PushFleetCore

extension DeliveryJudge {
    /// The refused pushes the backend should have known not to make (by rejection index), with
    /// when it knew. It was told by another send whose push to the same token was refused: at
    /// that send's answer, or at the refusal's arrival if later (a backend may answer before it
    /// pushes). A refused push counts against it only if its send started after that and no
    /// registration of the device was requested in between (the backend may have taken a fresh
    /// registration of the token for a live one). A refused push that names no send is taken to
    /// have started `deadline` before it arrived, and never tells: the backend's knowledge is
    /// dated only by sends the ledger can place.
    func deadTokenPushes() -> [Int: Int64] {
        var result: [Int: Int64] = [:]
        let rejections = ledger.rejections
        let byDevice = Dictionary(grouping: rejections.indices, by: { rejections[$0].device })
        for (device, indices) in byDevice {
            // Earliest knowledge first: the first tell that applies to a refusal is the one it counts from.
            let told: [(send: Int, start: Int64, known: Int64)] = indices.compactMap { index in
                guard case .send(let send) = resolve(rejections[index].attribution, at: rejections[index].time) else { return nil }
                return (send.id, send.start, max(send.end, rejections[index].time))
            }.sorted { $0.known < $1.known }
            guard !told.isEmpty else { continue }
            let registrations = ledger.transitions[device].filter(\.eligible)
            for index in indices {
                let rejection = rejections[index]
                let own: (id: Int?, start: Int64, end: Int64)
                switch resolve(rejection.attribution, at: rejection.time) {
                case .send(let send): own = (send.id, send.start, send.end)
                case .unknown, .pastHorizon: own = (nil, rejection.time - deadline, rejection.time)
                case .otherRun: continue
                }
                let known = told.first { tell in
                    tell.send != own.id && tell.known < own.start
                        && !registrations.contains { $0.time > tell.start && $0.start < own.end }
                }?.known
                if let known { result[index] = known }
            }
        }
        return result
    }
}
