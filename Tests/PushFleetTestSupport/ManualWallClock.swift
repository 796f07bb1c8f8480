import Foundation
import Synchronization

/// A wall clock (ns since the epoch) that moves only when a test moves it, for servers whose
/// expiry and timers read an injected `now`.
package final class ManualWallClock: Sendable {
    private let nanoseconds: Atomic<Int64>

    /// Starts at the real time, so that credentials signed now (provider tokens) are current.
    package init() { nanoseconds = Atomic(Int64(Date().timeIntervalSince1970) * 1_000_000_000) }

    package var now: Int64 { nanoseconds.load(ordering: .relaxed) }
    package var seconds: Int64 { now / 1_000_000_000 }

    package func advance(by duration: Duration) {
        let (seconds, attoseconds) = duration.components
        nanoseconds.add(seconds * 1_000_000_000 + attoseconds / 1_000_000_000, ordering: .relaxed)
    }
}
