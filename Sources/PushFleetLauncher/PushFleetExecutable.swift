import Foundation

/// This process's own executable, to start more of it: `pushfleet serve` beside a bench or the
/// shards, a shard's `pushfleet run`.
public enum PushFleetExecutable {
    /// The path the process was started by, or /proc's link to it when that was a bare name
    /// found on PATH.
    public static var path: String {
        let path = URL(fileURLWithPath: CommandLine.arguments[0]).standardizedFileURL.path
        return FileManager.default.isExecutableFile(atPath: path) ? path : URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().path
    }
}
