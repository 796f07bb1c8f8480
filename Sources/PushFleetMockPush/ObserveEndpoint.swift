import Foundation
import HummingbirdWebSocket
import Logging
import NIOCore
import NIOPosix
import NIOWebSocket
import PushFleetCore
import ServiceLifecycle
import Synchronization

/// `GET /observe?run=<run id>`: a WebSocket on which a run in another process watches what
/// becomes of its pushes. The service first sends an empty report (the watch is in force from
/// then), then batches of ``PushReport``s as JSON text frames. Reports wait in a queue of bounded
/// length; past it they are left out and counted in the next batch's `lost`, so a run that reads
/// too slowly knows its view has a gap instead of the service's memory growing.
struct ObserveEndpoint {
    /// Reports queued at most for one watcher.
    static let maxQueued = 200_000
    /// Reports in one frame at most.
    static let maxBatch = 2_000

    let service: PushService

    /// A run id: what every token and nonce of the run carries.
    static func isRunID(_ text: Substring) -> Bool {
        (4...64).contains(text.count) && text.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber) }
    }

    func run(_ run: String, inbound: WebSocketInboundStream, outbound: WebSocketOutboundWriter, logger: Logger) async {
        let queue = ReportQueue(limit: Self.maxQueued)
        let watch = service.watch(run: run, { report in queue.add(report) }, hops: { hop in queue.add(hop) })
        defer { watch.cancel() }
        await withGracefulShutdownHandler {
            await withTaskGroup(of: Void.self) { group in
                group.addTask {
                    do {
                        try await outbound.write(Self.frame(PushReport()))
                        while let batch = await queue.next(max: Self.maxBatch) {
                            try await outbound.write(Self.frame(batch))
                        }
                        try await outbound.close(.normalClosure, reason: "shutting down")
                    } catch {
                        logger.debug("observe connection for run \(run) ended: \(error)")
                    }
                }
                group.addTask {
                    // The run sends nothing; reading notices when it leaves.
                    _ = try? await inbound.messages(maxSize: 4096).reduce(into: 0) { count, _ in count += 1 }
                }
                await group.next()
                group.cancelAll()
            }
        } onGracefulShutdown: {
            queue.finish()
        }
    }

    /// A text frame of the report's JSON, written from its bytes (no `String` between).
    static func frame(_ report: PushReport) -> WebSocketOutboundWriter.OutboundFrame {
        var json = JSONBytes(capacity: 0)
        report.encodeJSON(into: &json)
        return .custom(WebSocketFrame(fin: true, opcode: .text, data: ByteBuffer(bytes: json.bytes)))
    }
}

/// Reports waiting for one watcher's connection.
final class ReportQueue: Sendable {
    private struct State {
        var hops: [PushHop] = []
        /// Where each push's first report waits in `hops`, while it waits.
        var firstAt: [UInt64: Int] = [:]
        var notes: [HubNote] = []
        var lost = 0
        var waiter: CheckedContinuation<Void, Never>?
        var finished = false
    }

    private let state = Mutex(State())
    private let limit: Int
    /// Room kept between batches, at most.
    private static let keptCapacity = 4_096

    init(limit: Int) {
        self.limit = limit
    }

    func add(_ report: PushReport) {
        let waiter: CheckedContinuation<Void, Never>? = state.withLock { state in
            guard !state.finished else { return nil }
            for hop in report.hops { Self.queue(hop, in: &state, limit: limit) }
            for note in report.hub ?? [] {
                if state.hops.count + state.notes.count >= limit { state.lost += 1 } else { state.notes.append(note) }
            }
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    /// One hop, as ``add(_:)`` takes a report's.
    func add(_ hop: PushHop) {
        let waiter: CheckedContinuation<Void, Never>? = state.withLock { state in
            guard !state.finished else { return nil }
            Self.queue(hop, in: &state, limit: limit)
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    private static func queue(_ hop: PushHop, in state: inout State, limit: Int) {
        // A push written before its first report went out is sent as one report: a run reads
        // half as many for the pushes that go straight to their device.
        if hop.step == .written, let index = state.firstAt[hop.push], state.hops[index].then == nil {
            state.hops[index].step = .written
            state.hops[index].then = hop.at
        } else if state.hops.count + state.notes.count >= limit {
            state.lost += 1
        } else {
            if hop.step.isFirst { state.firstAt[hop.push] = state.hops.count }
            state.hops.append(hop)
        }
    }

    /// No more reports; ``next(max:)`` returns what is left, then nil.
    func finish() {
        let waiter: CheckedContinuation<Void, Never>? = state.withLock { state in
            state.finished = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    /// The next batch, waiting for one; nil once finished and empty, or cancelled.
    func next(max: Int) async -> PushReport? {
        while true {
            if Task.isCancelled { return nil }
            let batch: PushReport?? = state.withLock { state in
                if !state.hops.isEmpty || !state.notes.isEmpty || state.lost > 0 {
                    let hops: [PushHop]
                    if state.hops.count <= max {
                        hops = state.hops
                        // The next batch is likely this one's size: grown once, not by doublings
                        // on the pushes' path; a burst's storage is not kept.
                        state.hops = []
                        state.hops.reserveCapacity(Swift.min(hops.count, Self.keptCapacity))
                        // A long queue's index, rebuilt below, may hold far more room than a batch.
                        if state.firstAt.capacity <= Self.keptCapacity {
                            state.firstAt.removeAll(keepingCapacity: true)
                        } else {
                            state.firstAt = [:]
                        }
                    } else {
                        hops = Array(state.hops.prefix(max))
                        state.hops.removeFirst(max)
                        state.firstAt = state.firstAt.compactMapValues { $0 >= max ? $0 - max : nil }
                    }
                    let notes = state.notes
                    state.notes = []
                    defer { state.lost = 0 }
                    return PushReport(hops: hops, hub: notes.isEmpty ? nil : notes, lost: state.lost > 0 ? state.lost : nil)
                }
                return state.finished ? .some(nil) : nil
            }
            if let batch { return batch }
            await withTaskCancellationHandler {
                await withCheckedContinuation { continuation in
                    let ready = state.withLock { state in
                        if !state.hops.isEmpty || !state.notes.isEmpty || state.lost > 0 || state.finished { return true }
                        state.waiter = continuation
                        return false
                    }
                    if ready { continuation.resume() }
                }
            } onCancel: {
                finish()
            }
            await Self.gather()
        }
    }

    /// Waits 10 ms to gather a burst into one frame. On an event loop (`serve` runs its tasks on
    /// NIO's loops) with the loop's own timer: a task's sleep goes through Dispatch's timer
    /// thread and a worker and back, three threads woken per batch.
    private static func gather() async {
        if let loop = MultiThreadedEventLoopGroup.currentEventLoop {
            _ = try? await loop.scheduleTask(in: .milliseconds(10)) {}.futureResult.get()
        } else {
            try? await Task.sleep(for: .milliseconds(10))
        }
    }
}
