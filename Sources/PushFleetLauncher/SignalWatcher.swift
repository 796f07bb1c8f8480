import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Turns SIGINT and SIGTERM into calls ("SIGINT", "SIGTERM"), every one received, instead of the
/// default immediate exit; `cancel()` gives both their default action back.
///
/// The handlers are installed when the watcher is made, and only count (all a signal handler may
/// safely do); a task hands the counts on every 20 ms. Why not swift-service-lifecycle's
/// `UnixSignalsSequence`: it registers asynchronously with the signals ignored meanwhile, and on a
/// loaded machine a SIGINT sent 8 s after a command started was lost there, the run going on to
/// its end. One watcher at a time: the counts are the process's.
public final class SignalWatcher: Sendable {
    private let watching: Task<Void, Never>

    public init(_ handler: @escaping @Sendable (String) -> Void) {
        _ = interrupts.exchange(0, ordering: .relaxed)
        _ = terminations.exchange(0, ordering: .relaxed)
        signal(SIGINT) { _ in _ = interrupts.wrappingAdd(1, ordering: .relaxed) }
        signal(SIGTERM) { _ in _ = terminations.wrappingAdd(1, ordering: .relaxed) }
        watching = Task {
            while true {
                for _ in 0..<interrupts.exchange(0, ordering: .relaxed) { handler("SIGINT") }
                for _ in 0..<terminations.exchange(0, ordering: .relaxed) { handler("SIGTERM") }
                do { try await Task.sleep(for: .milliseconds(20)) } catch { return }
            }
        }
    }

    /// Ends the hand-on and restores the default action.
    public func cancel() {
        watching.cancel()
        Self.restoreDefaults()
    }

    private static func restoreDefaults() {
        signal(SIGINT, SIG_DFL)
        signal(SIGTERM, SIG_DFL)
    }
}

/// Signals received and not yet handed on; a signal handler may only touch lock-free state.
private let interrupts = Atomic<Int>(0)
private let terminations = Atomic<Int>(0)
