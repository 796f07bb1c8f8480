import Foundation
package import PushFleetCore
import PushFleetLedger
import Synchronization

extension Recorder {
    /// What one tape gave a replay.
    package struct ReplayedTape: Sendable {
        package var header: EventTape.Header
        package var events = 0
        /// The tape was cut inside a block (its shard stopped while writing).
        package var truncated = false
        /// The tape is damaged here; what came before it was replayed.
        package var damage: String?
    }

    /// One recorder holding the events of several tapes of one run (the shards of a run), each
    /// moved onto one time line: instant 0 is `wallStart` (wall-clock nanoseconds), and a
    /// tape's instants keep their distance from its origin's wall time. The ledger is set up
    /// as a run sets it up (every device of `plan`, the push reader), so judging the result
    /// judges a send recorded by one shard and its receipt recorded by another exactly as one
    /// process would have.
    ///
    /// Each shard watched the push service on its own: the merged view is watched from the
    /// latest start, with every shard's gaps, and unknown if any shard's was. A shard reports
    /// only its own devices' pushes (shard 0 those of no device and the hub's), so no report
    /// is counted twice. Markers every shard made (the traffic's start, its stages) are kept
    /// once: the first shard's, and any other's of a label not yet seen.
    ///
    /// Tapes whose header cannot be read are left out (the caller reads headers first); a tape
    /// damaged further on is replayed up to the damage, which its ``ReplayedTape`` names.
    ///
    /// `sendMissing` names send ids whose shard's tape is not replayed (a shard missing or
    /// left out): pushes attributed to them are not judged, rather than counted misdelivered.
    package static func replaying(
        _ tapes: [[UInt8]], plan: FleetPlan, layouts: [Scenario.PlatformName: PushLayout], wallStart: Int64, horizon: Duration? = nil,
        sendMissing: @Sendable (Int) -> Bool = { _ in false }
    ) -> (Recorder, [ReplayedTape]) {
        let recorder = Recorder(users: plan.users, start: 0, horizon: horizon)
        let tokens = plan.devices.map(\.token)
        for device in plan.devices { recorder.addDevice(.init(user: device.user, platform: device.platform, token: device.token)) }
        recorder.state.withLock { state in
            state.ledger.setPushReader(DeliveryLedger.PushReader(layouts: layouts, run: plan.runID))
            // Open, so reports past the ledger's bound still mark their gap.
            state.ledger.setPushServiceView(.watched(since: .min, gaps: []))
        }
        var replayed: [ReplayedTape] = []
        var views: [DeliveryLedger.PushServiceView?] = []
        var labels = Set<String>()
        for bytes in tapes {
            guard var reader = try? EventTapeReader(bytes: bytes, tokens: tokens, users: plan.users, shift: { Saturating.subtract($0.originWall, wallStart) }) else {
                continue
            }
            var tape = ReplayedTape(header: reader.header)
            var view: DeliveryLedger.PushServiceView?
            var own = Set<String>()
            var batch: [RunEvent] = []
            batch.reserveCapacity(4096)
            while true {
                let event: RunEvent
                do {
                    guard let next = try reader.next() else { break }
                    event = next
                } catch {
                    tape.damage = error.description
                    break
                }
                tape.events += 1
                switch event {
                case .pushServiceView(let new):
                    view = new
                case .pushServiceGap(let gap):
                    if case .watched(let since, let gaps) = view { view = .watched(since: since, gaps: gaps + [gap]) }
                case .receipt(let receipt, _):
                    if case .send(let id) = receipt.attribution, sendMissing(id) { continue }
                    batch.append(event)
                case .rejection(let rejection):
                    if case .send(let id) = rejection.attribution, sendMissing(id) { continue }
                    batch.append(event)
                case .marker(let label, _):
                    own.insert(label)
                    if !labels.contains(label) { batch.append(event) }
                default:
                    batch.append(event)
                }
                if batch.count == 4096 {
                    recorder.apply(batch)
                    batch.removeAll(keepingCapacity: true)
                }
            }
            recorder.apply(batch)
            labels.formUnion(own)
            tape.truncated = reader.truncated
            replayed.append(tape)
            views.append(view)
        }
        recorder.state.withLock { state in
            var since = Int64.min
            var gaps: [Range<Int64>] = []
            if case .watched(_, let own) = state.ledger.trail.view { gaps = own }
            var merged: DeliveryLedger.PushServiceView?
            for (index, view) in views.enumerated() {
                switch view {
                case nil:
                    merged = .unknown("shard \(replayed[index].header.shard) never said whether it watched the push service")
                case .unknown(let reason):
                    merged = .unknown("shard \(replayed[index].header.shard): \(reason)")
                case .watched(let start, let own):
                    since = max(since, start)
                    gaps += own
                }
                if merged != nil { break }
            }
            state.ledger.setPushServiceView(merged ?? .watched(since: since, gaps: gaps.sorted { $0.lowerBound < $1.lowerBound }))
        }
        return (recorder, replayed)
    }
}
