import Dispatch

#if canImport(Glibc)
import Glibc
#endif

/// Turns SIGINT and SIGTERM into calls, instead of the default immediate exit.
public final class SignalWatcher {
    private let sources: [any DispatchSourceSignal]

    public init(_ handler: @escaping @Sendable (String) -> Void) {
        var sources: [any DispatchSourceSignal] = []
        for (number, name) in [(SIGINT, "SIGINT"), (SIGTERM, "SIGTERM")] {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { handler(name) }
            source.resume()
            sources.append(source)
        }
        self.sources = sources
    }

    public func cancel() {
        for source in sources { source.cancel() }
        signal(SIGINT, SIG_DFL)
        signal(SIGTERM, SIG_DFL)
    }
}
