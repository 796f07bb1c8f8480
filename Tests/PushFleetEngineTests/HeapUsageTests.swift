@testable import PushFleetLauncher
import Testing

/// The heap figure `bench soak` fits its slope to.
@Suite("Heap in use")
struct HeapUsageTests {
    @Test("the totals after the last arena: obtained plus mmapped, less free chunks")
    func totals() {
        let xml = """
            <malloc version="1">
            <heap nr="0">
            <total type="fast" count="1" size="999"/>
            <system type="current" size="999999"/>
            </heap>
            <heap nr="1">
            <total type="rest" count="3" size="777"/>
            </heap>
            <total type="fast" count="2" size="100"/>
            <total type="rest" count="5" size="2000"/>
            <total type="mmap" count="1" size="50000"/>
            <system type="current" size="300000"/>
            <system type="max" size="400000"/>
            <aspace type="total" size="300000"/>
            </malloc>
            """
        #expect(HeapUsage.totals(xml) == 300_000 + 50_000 - 100 - 2000)
        #expect(HeapUsage.totals("<malloc></malloc>") == nil)
        #expect(HeapUsage.totals("") == nil)
    }

    @Test("this process's figure is read from glibc (other tests allocate beside it, so only its presence is checked)")
    func live() throws {
        let bytes = try #require(HeapUsage.inUse())
        #expect(bytes > 0)
    }
}
