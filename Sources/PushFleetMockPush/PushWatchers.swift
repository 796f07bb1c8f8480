public import PushFleetCore
import Synchronization

/// The runs watching the push service: each gets the reports (``PushHop``) of its own pushes —
/// those whose token carries its run id, or whose body carries one of its nonces — and every hub
/// note that names none of another run's sends. A run in this process is handed each report as
/// it is made; a run in another process reads them in batches from `/observe`
/// (``ObserveEndpoint``), from a queue of bounded length.
final class PushWatchers: Sendable {
    final class Watcher: Sendable {
        let run: String
        private let sink: @Sendable (PushReport) -> Void
        /// Takes a hop alone, where the sink would wrap it in a report of its own: `/observe`'s
        /// queue, two hops for every push.
        private let hopSink: (@Sendable (PushHop) -> Void)?

        init(run: String, sink: @escaping @Sendable (PushReport) -> Void, hopSink: (@Sendable (PushHop) -> Void)? = nil) {
            self.run = run
            self.sink = sink
            self.hopSink = hopSink
        }

        func take(_ hop: PushHop) {
            if let hopSink { return hopSink(hop) }
            sink(PushReport(hops: [hop]))
        }
        func take(_ note: HubNote) { sink(PushReport(hub: [note])) }
    }

    /// Replaced whole when a watcher comes or goes, so a report reads it without copying.
    private let watchers = Mutex<[Watcher]>([])
    /// Watchers now: the push path looks here first and builds no report when there are none.
    private let count = Atomic<Int>(0)

    var isActive: Bool { count.load(ordering: .relaxed) > 0 }

    func add(_ watcher: Watcher) {
        let total = watchers.withLock { watchers in
            watchers.append(watcher)
            return watchers.count
        }
        count.store(total, ordering: .relaxed)
    }

    func remove(_ watcher: Watcher) {
        let total = watchers.withLock { watchers in
            watchers.removeAll { $0 === watcher }
            return watchers.count
        }
        count.store(total, ordering: .relaxed)
    }

    /// Hands `hop` to every run it belongs to.
    func report(_ hop: @autoclosure () -> PushHop) {
        guard isActive else { return }
        let hop = hop()
        for watcher in watchers.withLock({ $0 }) where hop.belongs(toRun: watcher.run) {
            watcher.take(hop)
        }
    }

    /// Hands a hub note to every run it may be of: a note carrying another run's nonce is not.
    func report(_ note: @autoclosure () -> HubNote) {
        guard isActive else { return }
        let note = note()
        for watcher in watchers.withLock({ $0 }) where !note.body.contains("pf:") || note.body.contains("pf:\(watcher.run):") {
            watcher.take(note)
        }
    }
}

extension PushService: PushServiceWatching {
    private struct Watch: PushServiceWatch {
        let watchers: PushWatchers
        let watcher: PushWatchers.Watcher

        func cancel() { watchers.remove(watcher) }
    }

    public func watch(run: String, _ sink: @escaping @Sendable (PushReport) -> Void) -> any PushServiceWatch {
        watch(run: run, sink, hops: nil)
    }

    /// A watch whose hops go to `hops` one by one, and whose hub notes go to `sink`.
    func watch(run: String, _ sink: @escaping @Sendable (PushReport) -> Void, hops: (@Sendable (PushHop) -> Void)?) -> any PushServiceWatch {
        let watcher = PushWatchers.Watcher(run: run, sink: sink, hopSink: hops)
        watchers.add(watcher)
        return Watch(watchers: watchers, watcher: watcher)
    }
}
