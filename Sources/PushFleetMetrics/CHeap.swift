#if canImport(Glibc)
import Glibc
#endif

/// Gives the C heap's free pages back to the system (glibc's `malloc_trim`, which also releases
/// free pages inside arenas). After a fold the ledger has freed what it let go of, but glibc keeps
/// the pages it had: the heap in use stays flat while resident memory climbs with every fold.
enum HeapTrim {
    #if canImport(Glibc)
    // malloc.h is not in Glibc's module map.
    private static let trim: (@convention(c) (Int) -> Int32)? = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "malloc_trim").map {
        unsafeBitCast($0, to: (@convention(c) (Int) -> Int32).self)
    }
    #endif

    static func releaseFreePages() {
        #if canImport(Glibc)
        _ = trim?(0)
        #endif
    }
}
