import Synchronization

/// The spans a server of pushfleet's (the reference backend, the notification hub) recorded of the
/// requests it served, held until the run has judged its pushes: the run exports those of the traces it
/// exports (its incidents' and its sample's) and no others, so the ledger decides what leaves,
/// as for the run's own spans. The last ``capacity`` spans are kept; older ones are overwritten
/// and counted, so memory does not grow with the length of a run. The spans of traces the run's
/// sample will hold (a function of the trace id, `keeping`) are kept apart, up to
/// ``keptCapacity``, so a long run or a capacity search still exports its sample whole.
///
/// `serve`, which has no ledger, exports as an SDK's batch processor does instead: it
/// ``drain()``s the ring every second, and a ring that filled between two drains has lost its
/// oldest spans, counted.
public final class SpanRecorder: Sendable {
    /// The `service.name` its spans are exported under.
    public let service: String
    public let capacity: Int
    public let keptCapacity: Int
    private let keeping: (@Sendable (TraceIdentity) -> Bool)?
    private let state: Mutex<State>
    private let salts = Atomic<UInt64>(0)

    private struct State {
        var ring: [TraceSpan] = []
        var next = 0
        var overwritten = 0
        var kept: [TraceSpan] = []
    }

    public init(
        service: String, capacity: Int = 50_000, keeping: (@Sendable (TraceIdentity) -> Bool)? = nil, keptCapacity: Int = 20_000
    ) {
        self.service = service
        self.capacity = max(1, capacity)
        self.keptCapacity = max(0, keptCapacity)
        self.keeping = keeping
        state = Mutex(State())
    }

    /// A number never handed out before, to derive a span id unique within the process.
    public func nextSalt() -> UInt64 {
        salts.wrappingAdd(1, ordering: .relaxed).newValue
    }

    public func record(_ span: TraceSpan) {
        let keep = keeping?(span.identity) ?? false
        state.withLock { state in
            if keep, state.kept.count < keptCapacity {
                state.kept.append(span)
                return
            }
            if state.ring.count < capacity {
                state.ring.append(span)
            } else {
                state.ring[state.next] = span
                state.overwritten += 1
            }
            state.next = (state.next + 1) % capacity
        }
    }

    /// The spans held of these traces (by ``TraceIdentity/traceID``), oldest first, and how many
    /// spans of any trace were overwritten before this call.
    public func spans(ofTraces traces: Set<String>) -> (spans: [TraceSpan], overwritten: Int) {
        let (ring, next, overwritten, kept) = state.withLock { ($0.ring, $0.next, $0.overwritten, $0.kept) }
        return ((kept + oldestFirst(ring, next: next)).filter { traces.contains($0.identity.traceID) }, overwritten)
    }

    /// Every span held, oldest first, and how many were overwritten since the last drain; the
    /// recorder is empty after it.
    public func drain() -> (spans: [TraceSpan], overwritten: Int) {
        let (ring, next, overwritten, kept) = state.withLock { state in
            defer {
                state.ring.removeAll(keepingCapacity: true)
                state.kept.removeAll(keepingCapacity: true)
                (state.next, state.overwritten) = (0, 0)
            }
            return (state.ring, state.next, state.overwritten, state.kept)
        }
        return (kept + oldestFirst(ring, next: next), overwritten)
    }

    private func oldestFirst(_ ring: [TraceSpan], next: Int) -> [TraceSpan] {
        ring.count < capacity ? ring : Array(ring[next...] + ring[..<next])
    }
}

/// The `service.name`s pushfleet exports under.
public enum TraceService {
    /// The fleet: sends, the ledger's verdicts, the devices.
    public static let fleet = "pushfleet"
    /// The push service's part of each push, made by the run from the push service's reports.
    public static let pushService = "pushfleet-push-service"
    /// The reference backend's own spans.
    public static let backend = "pushfleet-backend"
    /// The notification hub's own spans.
    public static let hub = "pushfleet-hub"
}

/// Where the embedded system's servers record their spans, each exported under its own service.
public struct ServerSpans: Sendable {
    public let backend: SpanRecorder
    public let hub: SpanRecorder

    /// - Parameter keeping: the traces the run's sample will hold, kept apart from each ring.
    public init(capacity: Int = 50_000, keeping: (@Sendable (TraceIdentity) -> Bool)? = nil) {
        backend = SpanRecorder(service: TraceService.backend, capacity: capacity, keeping: keeping)
        hub = SpanRecorder(service: TraceService.hub, capacity: capacity, keeping: keeping)
    }

    public var all: [SpanRecorder] { [backend, hub] }
}
