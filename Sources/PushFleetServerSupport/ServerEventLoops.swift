/// How many event loops `pushfleet serve` runs: every connection of the embedded system and every
/// task (NIO's loops are its executor there) share them.
///
/// One loop for every two cores by default. A secure push crosses four connections in `serve`
/// (the backend's send, the in-process provider request's two ends, the device's socket, then its
/// fetch), each on the loop that accepted it; with a loop per core most pushes hop between loops,
/// and each hop wakes a sleeping thread. On two cores, one loop spent 16% less of the servers' CPU
/// per delivered push than two, on average over four alternated `bench delivery` runs
/// (docs/performance-servers.md), and leaves the other core to a fleet beside it. A `serve` on a machine of its own gives `--event-loops` the cores.
public enum ServerEventLoops {
    public static let flag = "--event-loops"
    public static let range = 1...1024

    public static func defaultCount(cores: Int) -> Int {
        max(1, cores / 2)
    }

    /// The loop count the arguments of `pushfleet serve` ask for: the flag's value when it is given
    /// and in range, else the default. Read before the arguments are parsed (the loops must exist
    /// before the first task runs); a bad value is refused by the parser afterwards.
    public static func count(arguments: some Sequence<String>, cores: Int) -> Int {
        var value: Substring?
        var iterator = arguments.makeIterator()
        while let argument = iterator.next() {
            if argument == "--" { break }
            if argument == flag {
                value = iterator.next().map { Substring($0) }
            } else if argument.hasPrefix(flag + "=") {
                value = argument.dropFirst(flag.count + 1)
            }
        }
        if let value, let count = Int(value), range.contains(count) { return count }
        return defaultCount(cores: cores)
    }
}
