#if canImport(Glibc)
import Glibc
#endif

/// The C heap's settings for long runs, and giving its free pages back to the system.
///
/// glibc keeps what a run frees inside its arenas: the heap in use stays flat over a 30-minute
/// run while resident memory climbs. Two things feed that growth: an arena per allocating thread
/// (up to 8 per core; the event loops, the pool and the recorder all allocate), and blocks past
/// the mmap threshold, which glibc raises each time one is freed, so the ledger's large tables
/// end up inside the heap and leave holes there when they grow or are let go.
public enum CHeap {
    #if canImport(Glibc)
    // malloc.h is not in Glibc's module map.
    private static let trim: (@convention(c) (Int) -> Int32)? = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "malloc_trim").map {
        unsafeBitCast($0, to: (@convention(c) (Int) -> Int32).self)
    }
    private static let mallopt: (@convention(c) (Int32, Int32) -> Int32)? = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "mallopt").map {
        unsafeBitCast($0, to: (@convention(c) (Int32, Int32) -> Int32).self)
    }
    #endif

    /// At most one arena per core (2 to 8), and a fixed mmap threshold of 128 KiB, so a large
    /// block goes back to the system when it is freed. Called once, before threads start; an
    /// environment's own `MALLOC_ARENA_MAX` or `MALLOC_MMAP_THRESHOLD_` is left as it is.
    public static func configureForLongRuns(cores: Int) {
        #if canImport(Glibc)
        guard let mallopt else { return }
        if getenv("MALLOC_ARENA_MAX") == nil { _ = mallopt(-8, Int32(min(8, max(2, cores)))) }  // M_ARENA_MAX
        if getenv("MALLOC_MMAP_THRESHOLD_") == nil { _ = mallopt(-3, 128 * 1024) }  // M_MMAP_THRESHOLD
        #endif
    }

    static func releaseFreePages() {
        #if canImport(Glibc)
        _ = trim?(0)
        #endif
    }
}
