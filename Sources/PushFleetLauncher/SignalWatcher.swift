import UnixSignals

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Turns SIGINT and SIGTERM into calls ("SIGINT", "SIGTERM"), every one received, instead of the
/// default immediate exit; `cancel()` gives both their default action back.
public final class SignalWatcher: Sendable {
    private let watching: Task<Void, Never>

    public init(_ handler: @escaping @Sendable (String) -> Void) {
        // The sequence registers asynchronously: until it has, a signal must not end the process.
        signal(SIGINT, SIG_IGN)
        signal(SIGTERM, SIG_IGN)
        watching = Task {
            let signals = await UnixSignalsSequence(trapping: .sigint, .sigterm)
            // Cancelled while it registered: the registration may have changed the disposition since.
            guard !Task.isCancelled else { return Self.restoreDefaults() }
            for await signal in signals { handler(signal.description) }
        }
    }

    /// Ends the iteration (which releases the sequence's sources) and restores the default action;
    /// the sequence itself leaves its handlers installed.
    public func cancel() {
        watching.cancel()
        Self.restoreDefaults()
    }

    private static func restoreDefaults() {
        signal(SIGINT, SIG_DFL)
        signal(SIGTERM, SIG_DFL)
    }
}
