/// One event loop of a server, as a timer it runs every ``interval`` measures it: its thread's
/// CPU time and how late the timer woke. Totals since the server started (`GET /admin/stats`,
/// `loops`), so a client takes the difference of two readings for the time between them.
public struct LoopLoad: Codable, Sendable, Equatable {
    /// How often the timer is due (ns).
    public static let interval: Int64 = 100_000_000
    /// A check that woke this much after it was due counts as late (ns): every request on the
    /// loop waited about as long.
    public static let lateThreshold: Int64 = 100_000_000

    /// Wall time from the loop's first check to its latest (ns).
    public var wallNanoseconds: Int64 = 0
    /// CPU the loop's thread used over the same span (ns).
    public var cpuNanoseconds: Int64 = 0
    /// Checks made after the first.
    public var checks: Int = 0
    /// Checks that woke at least ``lateThreshold`` after they were due, and by how much in all (ns).
    public var lateChecks: Int = 0
    public var lateNanoseconds: Int64 = 0
    /// Time the loop's thread was ready to run and waited for a core over the same span (ns):
    /// other processes on its cores, or a CPU quota, held it back. nil where the kernel does not
    /// say (`/proc/thread-self/schedstat`), or from a push service that predates it.
    public var waitNanoseconds: Int64?

    public init() {}

    /// The counts from `earlier` to `self`; nil when `earlier` is not an earlier reading of the
    /// same loop (the server restarted in between).
    public func since(_ earlier: LoopLoad) -> LoopLoad? {
        var span = LoopLoad()
        span.wallNanoseconds = wallNanoseconds - earlier.wallNanoseconds
        span.cpuNanoseconds = cpuNanoseconds - earlier.cpuNanoseconds
        span.checks = checks - earlier.checks
        span.lateChecks = lateChecks - earlier.lateChecks
        span.lateNanoseconds = lateNanoseconds - earlier.lateNanoseconds
        guard span.wallNanoseconds >= 0, span.cpuNanoseconds >= 0, span.checks >= 0, span.lateChecks >= 0, span.lateNanoseconds >= 0 else {
            return nil
        }
        if let now = waitNanoseconds, let then = earlier.waitNanoseconds {
            guard now >= then else { return nil }
            span.waitNanoseconds = now - then
        }
        return span
    }
}

/// The push service's process, totals since its load monitor started (`GET /admin/stats`,
/// `process`): its CPU (every thread's) and the cores it may run on.
public struct ProcessLoad: Codable, Sendable, Equatable {
    public var cpuNanoseconds: Int64
    public var wallNanoseconds: Int64
    public var cores: Int

    public init(cpuNanoseconds: Int64, wallNanoseconds: Int64, cores: Int) {
        self.cpuNanoseconds = cpuNanoseconds
        self.wallNanoseconds = wallNanoseconds
        self.cores = cores
    }

    /// The share of its cores the process used from `earlier` to `self`; nil when `earlier` is
    /// not an earlier reading of the same process, or no time passed.
    public func coreShare(since earlier: ProcessLoad) -> Double? {
        let cpu = cpuNanoseconds - earlier.cpuNanoseconds
        let wall = wallNanoseconds - earlier.wallNanoseconds
        guard cpu >= 0, wall > 0, cores > 0, cores == earlier.cores else { return nil }
        return Double(cpu) / Double(wall) / Double(cores)
    }
}
