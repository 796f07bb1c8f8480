import Foundation
public import PushFleetCore

extension DeliveryLedger {
    /// Where a received push went on its way: when the hub took its send (if it came through
    /// one), when the push service accepted it and when it wrote it to the device's socket. A device
    /// reads these from the push's frame; a push service that is not pushfleet's gives none.
    ///
    /// Kept with every receipt, so it is small: each instant as microseconds before the receipt.
    public struct PushPath: Sendable, Equatable {
        private static let none = UInt32.max
        private var acceptedBefore: UInt32
        private var writtenBefore: UInt32
        private var hubBefore: UInt32
        private var flags: UInt8
        /// The trace context the provider request carried (low half of its trace id, its span
        /// id; 0 for none): the span the push service's part of the push is a child of.
        private var contextLow: UInt64 = 0
        private var contextSpan: UInt64 = 0

        /// Instants on the run's clock; `receivedAt` is the receipt's. `context`: the provider
        /// request's trace context, as the push's frame handed it on.
        public init(
            hubAt: Int64? = nil, acceptedAt: Int64, writtenAt: Int64?, held: Bool = false, delayed: Bool = false, receivedAt: Int64,
            context: TraceIdentity? = nil
        ) {
            func before(_ instant: Int64) -> UInt32 { UInt32(clamping: max(0, Saturating.subtract(receivedAt, instant)) / 1_000).clamped(below: Self.none) }
            acceptedBefore = before(acceptedAt)
            writtenBefore = writtenAt.map(before) ?? Self.none
            hubBefore = hubAt.map(before) ?? Self.none
            flags = (held ? 1 : 0) | (delayed ? 2 : 0)
            if let context {
                contextLow = context.low
                contextSpan = context.span
            }
        }

        /// Its stored form (microseconds before the receipt, `UInt32.max` for none; flags), for
        /// files that keep receipts.
        package var raw: (accepted: UInt32, written: UInt32, hub: UInt32, flags: UInt8) { (acceptedBefore, writtenBefore, hubBefore, flags) }

        package init(raw: (accepted: UInt32, written: UInt32, hub: UInt32, flags: UInt8), context: PushContext? = nil) {
            acceptedBefore = raw.accepted
            writtenBefore = raw.written
            hubBefore = raw.hub
            flags = raw.flags & 3
            if let context {
                contextLow = context.low
                contextSpan = context.span
            }
        }

        /// The provider request's trace context, when it carried one.
        public var context: PushContext? { contextSpan == 0 ? nil : PushContext(low: contextLow, span: contextSpan) }

        /// It was held for the device while it was offline.
        public var held: Bool { flags & 1 != 0 }
        /// An injected latency fault held it back.
        public var delayed: Bool { flags & 2 != 0 }

        public func acceptedAt(receivedAt: Int64) -> Int64 { receivedAt - Int64(acceptedBefore) * 1_000 }
        public func writtenAt(receivedAt: Int64) -> Int64? { writtenBefore == Self.none ? nil : receivedAt - Int64(writtenBefore) * 1_000 }
        public func hubAt(receivedAt: Int64) -> Int64? { hubBefore == Self.none ? nil : receivedAt - Int64(hubBefore) * 1_000 }
        /// It came through a notification hub.
        public var viaHub: Bool { hubBefore != Self.none }
    }

    /// Of a provider request's trace context, what a run keeps: the low half of its trace id,
    /// enough to tell whether it is the send's trace (another trace matches with odds of 2⁻⁶⁴),
    /// and the span the push service's part is a child of.
    public struct PushContext: Sendable, Equatable {
        public var low: UInt64
        public var span: UInt64

        public init(low: UInt64, span: UInt64) {
            self.low = low
            self.span = span
        }

        /// The same trace as `trace`: the push service's part joins it under ``span``.
        public func isIn(_ trace: TraceIdentity) -> Bool { low == trace.low }

        /// ``span`` as 16 hex digits when the context is `trace`'s; nil for another trace's.
        public func spanID(in trace: TraceIdentity) -> String? {
            isIn(trace) ? TraceIdentity(high: 0, low: 0, span: span).spanID : nil
        }
    }

    /// How much of the push service's view a run had.
    public enum PushServiceView: Sendable, Equatable {
        /// Not watched: the push service is not pushfleet's, or would not be watched; why.
        case unknown(String)
        /// Watched from `since`; in each gap reports may be missing (the watch dropped, or the
        /// service left reports out because the run read too slowly).
        case watched(since: Int64, gaps: [Range<Int64>])
    }

    /// What the push service reported of one push not received yet (or never to be).
    struct PushRecord: Sendable {
        var token: String
        var platform: String
        var pushType: String
        /// Kept until the push is read (``PushReader``); dropped then.
        var body: String?
        var base64: Bool
        var attribution: Attribution?
        /// It came through a notification hub.
        var viaHub: Bool
        /// The first report's time: when the service refused or accepted it.
        var handedAt: Int64
        /// The latest step reported, and when.
        var step: PushHop.Step
        var status: Int?
        var reason: String?
        var stepAt: Int64 = 0
        /// The trace context the provider request carried (its first report's `trace`).
        var context: PushContext?

        /// What the judge tells of this push beside its pair's verdict.
        var part: PushPart { PushPart(step: step, handedAt: handedAt, stepAt: max(handedAt, stepAt), context: context) }
    }

    /// The push service's part of a push whose pair went wrong: its latest step and when, and the
    /// provider request's trace context, for the push service's span in the pair's trace.
    public struct PushPart: Sendable, Equatable {
        public var step: PushHop.Step
        /// When the push service refused or accepted it, on the run's clock.
        public var handedAt: Int64
        /// When its latest step was reported.
        public var stepAt: Int64
        public var context: PushContext?

        public init(step: PushHop.Step, handedAt: Int64, stepAt: Int64, context: PushContext?) {
            self.step = step
            self.handedAt = handedAt
            self.stepAt = stepAt
            self.context = context
        }
    }

    /// How a run reads a push body the push service reported: its receive description's layout
    /// per platform and its run id, as its devices read what they receive.
    public struct PushReader: Sendable {
        public var layouts: [Scenario.PlatformName: PushLayout]
        public var run: String

        public init(layouts: [Scenario.PlatformName: PushLayout], run: String) {
            self.layouts = layouts
            self.run = run
        }

        func attribution(body: String, base64: Bool, pushType: String, platform: String) -> Attribution {
            let bytes = base64 ? Array(Data(base64Encoded: body) ?? Data()) : Array(body.utf8)
            let layout = Scenario.PlatformName(rawValue: platform).flatMap { layouts[$0] } ?? PushLayout()
            return PushContent(body: bytes, pushType: pushType, layout: layout, run: run).attribution
        }

        /// A hub send's body: the platform's layout when the format is a platform's, else the
        /// nonce anywhere in it (a template's properties).
        func attribution(of note: HubNote) -> Attribution {
            let platform: Scenario.PlatformName? =
                switch note.format {
                case "apple": .apns
                case "fcmv1", "gcm": .fcm
                case "windows": .wns
                default: nil
                }
            let layout = platform.flatMap { layouts[$0] } ?? PushLayout()
            let pushType = platform == .wns && !note.body.hasPrefix("<") ? "wns/raw" : ""
            return PushContent(body: Array(note.body.utf8), pushType: pushType, layout: layout, run: run).attribution
        }
    }

    /// The push service's reports of a run's pushes, as material for the judge: pushes not
    /// received yet are kept by number, and dropped once their device has received them (a
    /// received push's path comes with its receipt), so what is kept is what went wrong and what is
    /// still in flight.
    public struct PushTrail: Sendable {
        var open: [UInt64: PushRecord] = [:]
        /// Received pushes whose `written` report has not come yet (over `/observe` a report can
        /// come after the device's receipt).
        var receivedEarly = Set<UInt64>()
        /// Hub sends of this run (or naming content only), when the hub took them.
        var hubNotes: [(attribution: Attribution, at: Int64)] = []
        /// A push of the run came through a hub (a report or a receipt said so).
        var viaHub = false
        public internal(set) var view: PushServiceView = .unknown("the push service was not watched")
        var reader: PushReader?
        /// Reports recorded, for the record.
        public internal(set) var reports = 0
        /// First reports left out because ``maxKept`` pushes were kept already.
        public internal(set) var leftOut = 0

        /// Pushes kept at most: a push service that reported far more pushes than a run makes
        /// (a broken or hostile one) cannot grow the run's memory without bound; what is left out
        /// is a gap in the view.
        public internal(set) var maxKept = 2_000_000

        public init() {}
    }

    /// Reads push bodies the push service reports with `reader`.
    public mutating func setPushReader(_ reader: PushReader) {
        trail.reader = reader
    }

    /// Keeps at most `count` pushes not yet received (``PushTrail/maxKept``).
    public mutating func keepAtMost(_ count: Int) {
        trail.maxKept = max(0, count)
    }

    /// The run watches the push service from `since` (or cannot, and says why).
    public mutating func setPushServiceView(_ view: PushServiceView) {
        trail.view = view
    }

    /// Reports may be missing in `gap` (the watch dropped, or the service left some out).
    public mutating func addPushServiceGap(_ gap: Range<Int64>) {
        guard case .watched(let since, var gaps) = trail.view else { return }
        if let last = gaps.last, last.upperBound >= gap.lowerBound {
            gaps[gaps.count - 1] = last.lowerBound..<max(last.upperBound, gap.upperBound)
        } else {
            gaps.append(gap)
        }
        trail.view = .watched(since: since, gaps: gaps)
    }

    /// One report of the push service, its time already on the run's clock.
    public mutating func record(_ hop: PushHop) {
        trail.reports += 1
        if hop.step == .written || hop.step == .refused, trail.receivedEarly.remove(hop.push) != nil {
            trail.open[hop.push] = nil
            return
        }
        if hop.hubAt != nil { trail.viaHub = true }
        if trail.open.count >= trail.maxKept, trail.open[hop.push] == nil {
            trail.leftOut += 1
            addPushServiceGap(hop.at..<Saturating.add(hop.at, 1))
            return
        }
        // A later step of a push whose first report was missed (a gap) starts its record too.
        var record =
            (hop.step.isFirst ? nil : trail.open[hop.push])
            ?? PushRecord(
                token: hop.token, platform: hop.platform, pushType: hop.pushType ?? "", body: hop.body, base64: hop.base64 ?? false,
                viaHub: hop.hubAt != nil, handedAt: hop.at, step: hop.step, status: hop.status, reason: hop.reason,
                context: hop.trace.flatMap { TraceIdentity(traceparent: $0) }.map { PushContext(low: $0.low, span: $0.span) }
            )
        record.step = hop.step
        record.stepAt = hop.then ?? hop.at
        // A push that will never arrive is read now, so its body is not kept to the end.
        if hop.step.isFinal { read(&record) }
        trail.open[hop.push] = record
    }

    /// A hub took a send, its time already on the run's clock; kept when it names this run.
    public mutating func record(_ note: HubNote) {
        guard let reader = trail.reader else { return }
        let attribution = reader.attribution(of: note)
        switch attribution {
        case .send, .content: trail.hubNotes.append((attribution, note.at))
        case .otherRun, .unattributable, .undecryptable: break
        }
    }

    /// A push with this number reached its device (as a push, or as a refusal it was told of).
    mutating func pushArrived(_ push: UInt64?) {
        guard let push else { return }
        if let record = trail.open[push], record.step == .written || record.step == .refused {
            trail.open[push] = nil
        } else {
            trail.receivedEarly.insert(push)
        }
    }

    private func read(_ record: inout PushRecord) {
        guard let body = record.body, let reader = trail.reader else { return }
        record.attribution = reader.attribution(body: body, base64: record.base64, pushType: record.pushType, platform: record.platform)
        record.body = nil
    }

    /// The pushes still kept that were handed to the push service before `time` (every one
    /// without a time), read.
    func trailRecords(handedBefore time: Int64? = nil) -> [(push: UInt64, record: PushRecord)] {
        trail.open.compactMap { push, record in
            if let time, record.handedAt >= time { return nil }
            var record = record
            read(&record)
            return (push, record)
        }
    }
}
