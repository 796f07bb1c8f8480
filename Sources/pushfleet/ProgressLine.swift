import Foundation
import PushFleetLauncher
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The live progress line: redrawn in place on a terminal, plain periodic lines otherwise.
final class ProgressLine: Sendable {
    let enabled: Bool
    let terminal = isatty(STDERR_FILENO) != 0
    private let counter = SynchronizedCounter()

    init(enabled: Bool) {
        self.enabled = enabled
    }

    func show(_ line: String) {
        guard enabled else { return }
        if terminal {
            FileHandle.standardError.write(Data("\r\u{1B}[2K\(line)".utf8))
        } else if counter.next() % 5 == 0 {
            FileHandleOutput.standardError(line)
        }
    }

    func finish() {
        if enabled && terminal { FileHandle.standardError.write(Data("\n".utf8)) }
    }
}

final class SynchronizedCounter: Sendable {
    private let value = Mutex(0)

    func next() -> Int {
        value.withLock {
            $0 += 1
            return $0
        }
    }
}
