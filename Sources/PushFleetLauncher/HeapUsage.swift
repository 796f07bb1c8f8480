import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Bytes the C heap (glibc malloc, which Swift allocates through) holds for the program, over
/// every arena: what `malloc_info` reports as obtained from the system, plus mmapped chunks,
/// minus free chunks. `mallinfo2` would be cheaper but counts the main arena only, and a
/// multithreaded process allocates mostly elsewhere.
public enum HeapUsage {
    public static func inUse() -> UInt64? {
        report().map(\.inUse)
    }

    /// What the heap holds from the system (every arena, mmapped chunks included) and, of it,
    /// what is in use: the difference is free memory glibc keeps.
    public static func report() -> (obtained: UInt64, inUse: UInt64)? {
        #if canImport(Glibc)
        // malloc.h is not in Glibc's module map.
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "malloc_info") else { return nil }
        let mallocInfo = unsafeBitCast(symbol, to: (@convention(c) (Int32, UnsafeMutablePointer<FILE>?) -> Int32).self)
        var buffer: UnsafeMutablePointer<CChar>?
        var size = 0
        guard let stream = open_memstream(&buffer, &size) else { return nil }
        let status = mallocInfo(0, stream)
        fclose(stream)
        guard let buffer else { return nil }
        defer { free(buffer) }
        guard status == 0 else { return nil }
        return split(String(cString: buffer))
        #else
        return nil
        #endif
    }

    /// The totals after the last arena's `</heap>`.
    static func totals(_ xml: String) -> UInt64? {
        split(xml)?.inUse
    }

    static func split(_ xml: String) -> (obtained: UInt64, inUse: UInt64)? {
        guard let end = xml.range(of: "</heap>", options: .backwards) else { return nil }
        var sizes: [String: Int64] = [:]
        for line in xml[end.upperBound...].split(separator: "\n") {
            guard let typeRange = line.range(of: "type=\""), let sizeRange = line.range(of: "size=\"") else { continue }
            let kind = (line.hasPrefix("<system") ? "system." : line.hasPrefix("<total") ? "total." : "other.")
                + line[typeRange.upperBound...].prefix { $0 != "\"" }
            sizes[kind] = Int64(line[sizeRange.upperBound...].prefix { $0 != "\"" })
        }
        guard let current = sizes["system.current"] else { return nil }
        let obtained = current + (sizes["total.mmap"] ?? 0)
        let used = obtained - (sizes["total.fast"] ?? 0) - (sizes["total.rest"] ?? 0)
        return (UInt64(max(0, obtained)), UInt64(max(0, used)))
    }
}
