import Foundation
import NIOCore
import PushFleetClients
import PushFleetCore
import PushFleetLedger
import PushFleetMetrics
import PushFleetWire
import Synchronization

/// Watches the push service for one run, so every lost or late pair can be explained by where it
/// went: in process when the launcher handed over the service it started, else over the push
/// service's `/observe` WebSocket. The reports' wall-clock times are moved onto the run's clock
/// here. A dropped connection is retried with backoff and its span recorded as a gap; a push
/// service that cannot be watched (not pushfleet's) leaves the run's view `unknown`, and says why.
struct PushServiceWatcher: Sendable {
    let context: RunContext
    /// First connection attempts before the run gives up on watching.
    static let attempts = 3

    /// Watches until cancelled; `ready` is called once the watch is in force or known impossible.
    func run(ready: @escaping @Sendable () -> Void) async {
        let context = context
        if let service = context.services.system.pushWatch {
            let watch = service.watch(run: context.spec.runID) { report in
                let own = context.spec.ownPart(of: report)
                if !own.hops.isEmpty || own.hub?.isEmpty == false { context.emit(.pushReport(Self.onRunClock(own, context))) }
            }
            context.emit(.pushServiceView(.watched(since: context.now(), gaps: [])))
            ready()
            await Self.untilCancelled()
            watch.cancel()
            return
        }
        // A push service that takes the connection and never answers does not hold the run up.
        await withTaskGroup(of: Bool.self) { group in
            // On the loop its connection reads on: a batch of reports wakes no other thread.
            let loop = context.services.eventLoops.next()
            group.addTask(executorPreference: EventLoopExecutor(loop)) {
                await watchOverSocket(on: loop, ready: ready)
                return true
            }
            group.addTask {
                _ = await context.sleep(until: context.now() + Self.readyWithin.nanoseconds)
                ready()
                return false
            }
            while let loopEnded = await group.next() {
                if loopEnded { group.cancelAll() }
            }
        }
    }

    /// How long the run waits for the watch before it starts without.
    static let readyWithin = Duration.seconds(5)

    private final class SocketState: Sendable {
        struct Values {
            var connected = false
            /// When the last connection dropped, while no new one has sent its first report.
            var gapStart: Int64?
            var failure = ""
        }

        let values = Mutex(Values())
    }

    private func watchOverSocket(on loop: any EventLoop, ready: @escaping @Sendable () -> Void) async {
        let context = context
        let url = Self.observeURL(pushService: context.services.pushServiceURL, run: context.spec.runID)
        let state = SocketState()
        var backoff = Backoff(base: .milliseconds(100), cap: .seconds(2), seed: context.spec.scenario.seed ^ 0x0B5E)
        var attempts = 0
        while !Task.isCancelled && !context.isStopping {
            do {
                try await PushObserveSocket.connect(url: url, on: loop, logger: context.services.logger) { socket in
                    var first = true
                    for try await report in socket.reports {
                        let now = context.now()
                        if first {
                            first = false
                            let (opened, gap) = state.values.withLock { values in
                                defer {
                                    values.connected = true
                                    values.gapStart = nil
                                }
                                return (!values.connected, values.gapStart)
                            }
                            if opened {
                                context.emit(.pushServiceView(.watched(since: now, gaps: [])))
                                ready()
                            } else if let gap {
                                context.emit(.pushServiceGap(gap..<now))
                            }
                        }
                        // The service left reports out: they fell since the last batch.
                        if let lost = report.lost, lost > 0 { context.emit(.pushServiceGap(max(context.time.start, now - 1_000_000_000)..<now)) }
                        let own = context.spec.ownPart(of: report)
                        if !own.hops.isEmpty || own.hub?.isEmpty == false { context.emit(.pushReport(Self.onRunClock(own, context))) }
                    }
                }
            } catch {
                state.values.withLock { $0.failure = String(describing: error) }
            }
            if Task.isCancelled || context.isStopping { break }
            let (connected, dropped) = state.values.withLock { values in
                let dropped = values.connected && values.gapStart == nil
                if dropped { values.gapStart = context.now() }
                return (values.connected, dropped)
            }
            // A connection that held starts the backoff afresh.
            if dropped { backoff.reset() }
            if !connected {
                attempts += 1
                if attempts >= Self.attempts {
                    let failure = state.values.withLock { $0.failure }
                    context.emit(
                        .pushServiceView(
                            .unknown("the push service at \(context.services.pushServiceURL) does not say where pushes go (GET \(GatewayFrame.observePath): \(failure))")
                        )
                    )
                    ready()
                    return
                }
            }
            guard await context.sleep(until: context.now() + backoff.next()) else { break }
        }
        // Stopped while disconnected: the gap lasts to the end.
        if let gap = state.values.withLock({ $0.gapStart }) { context.emit(.pushServiceGap(gap..<Int64.max)) }
        if !state.values.withLock({ $0.connected }) { ready() }
    }

    static func observeURL(pushService: String, run: String) -> String {
        var base = pushService
        if base.hasPrefix("https://") {
            base = "wss://" + base.dropFirst("https://".count)
        } else if base.hasPrefix("http://") {
            base = "ws://" + base.dropFirst("http://".count)
        }
        while base.hasSuffix("/") { base.removeLast() }
        return base + GatewayFrame.observePath + "?run=" + run
    }

    /// The report with its wall-clock times moved onto the run's clock.
    static func onRunClock(_ report: PushReport, _ context: RunContext) -> PushReport {
        var report = report
        for index in report.hops.indices {
            report.hops[index].at = context.time.onRunClock(wall: report.hops[index].at)
            report.hops[index].hubAt = report.hops[index].hubAt.map(context.time.onRunClock(wall:))
            report.hops[index].then = report.hops[index].then.map(context.time.onRunClock(wall:))
        }
        if report.hub != nil {
            for index in report.hub!.indices { report.hub![index].at = context.time.onRunClock(wall: report.hub![index].at) }
        }
        return report
    }

    /// Returns when the task is cancelled.
    static func untilCancelled() async {
        while !Task.isCancelled {
            try? await Task.sleep(for: .seconds(3_600))
        }
    }
}

/// Opens once; waiters before and after it return then.
final class Latch: Sendable {
    private let state = Mutex<(open: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    func open() {
        let waiters = state.withLock { state in
            defer {
                state.open = true
                state.waiters = []
            }
            return state.open ? [] : state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    func wait() async {
        await withCheckedContinuation { continuation in
            let open = state.withLock { state in
                if !state.open { state.waiters.append(continuation) }
                return state.open
            }
            if open { continuation.resume() }
        }
    }
}
