import Logging
import Synchronization

/// Collects log lines as `level message metadata`, for tests that check what was logged.
final class LogCapture: Sendable {
    private let collected = Mutex<[(level: Logger.Level, text: String)]>([])

    var lines: [String] { collected.withLock { $0.map(\.text) } }
    /// The lines at error level and above.
    var errors: [String] { collected.withLock { $0.filter { $0.level >= .error }.map(\.text) } }

    /// A logger whose lines at `level` and above are kept here.
    func logger(level: Logger.Level = .info) -> Logger {
        var logger = Logger(label: "test") { _ in Handler(capture: self) }
        logger.logLevel = level
        return logger
    }

    var logger: Logger { logger() }

    struct Handler: LogHandler {
        let capture: LogCapture
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .info

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            let fields = (metadata.merging(event.metadata ?? [:]) { $1 }).map { "\($0.key)=\($0.value)" }.sorted().joined(separator: " ")
            capture.collected.withLock { $0.append((event.level, "\(event.level) [\(event.source)] \(event.message) \(fields)")) }
        }
    }
}
