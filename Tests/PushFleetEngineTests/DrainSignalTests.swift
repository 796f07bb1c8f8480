@testable import PushFleetEngine
import Testing

@Suite("Drain signal")
struct DrainSignalTests {
    @Test("a poke after the drain looked ends its wait, whether it came before the wait or during it")
    func pokes() async {
        let signal = DrainSignal()
        signal.arm()
        let seen = signal.pokes
        signal.poke()
        // Poked between the look and the wait: returns at once.
        await signal.wait(after: seen)
        #expect(signal.pokes == seen + 1)

        let again = signal.pokes
        let waiting = Task { await signal.wait(after: again) }
        // A wait has no deadline of its own: it ends only when poked (or cancelled), whether the
        // poke finds it waiting or comes before it registers.
        signal.poke()
        await waiting.value
        #expect(signal.pokes == again + 1)
    }

    @Test("pokes before the drain armed it are not counted; a cancelled wait ends")
    func armingAndCancellation() async {
        let signal = DrainSignal()
        signal.poke()
        #expect(signal.pokes == 0)
        signal.arm()
        let waiting = Task { await signal.wait(after: 0) }
        waiting.cancel()
        await waiting.value
        #expect(signal.pokes == 0)
    }
}
