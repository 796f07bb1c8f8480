@testable import PushFleetMockPush
import PushFleetWire
import Testing

/// The gateway connection's outbox: what is written on the connection's loop, in which order,
/// with how many hops to the loop, and what a close or the connection's end leaves unwritten.
@Suite("Gateway outbox")
struct GatewayOutboxTests {
    private static func push(_ number: UInt64) -> GatewayOutbox.Item {
        var frame = PushFrame(platform: .apns, token: "t", id: "i\(number)", acceptedAt: 0, pushType: "alert", body: "{}")
        frame.push = number
        return .push(frame)
    }

    /// Adds the items in turn, returning which asked for a write.
    private static func add(_ items: [GatewayOutbox.Item], to outbox: inout GatewayOutbox) -> [Bool] {
        items.map { outbox.add($0) }
    }

    private static func numbers(_ items: [GatewayOutbox.Item]) -> [String] {
        items.map { item in
            switch item {
            case .text(let text): "text:\(text)"
            case .push(let frame): "push:\(frame.push ?? 0)"
            case .close(let reason): "close:\(reason)"
            }
        }
    }

    @Test("a burst handed over while a write is due asks for one write, which takes it all in order")
    func burstIsOneWrite() {
        var outbox = GatewayOutbox()
        let asked = Self.add([.text("subscribed"), Self.push(1), Self.push(2)], to: &outbox)
        #expect(asked == [true, false, false])
        let first = outbox.take()
        #expect(Self.numbers(first) == ["text:subscribed", "push:1", "push:2"])
        // Once taken, the next push asks for a write of its own.
        let next = Self.add([Self.push(3)], to: &outbox)
        #expect(next == [true])
        let second = outbox.take()
        #expect(Self.numbers(second) == ["push:3"])
        let third = outbox.take()
        #expect(third.isEmpty)
    }

    @Test("a close ends what is written: what comes after it in the same write and any later push is never taken")
    func closeEndsTheWrites() {
        var outbox = GatewayOutbox()
        let asked = Self.add([Self.push(1), .close(reason: "forced"), Self.push(2)], to: &outbox)
        #expect(asked == [true, false, false])
        let taken = outbox.take()
        #expect(Self.numbers(taken) == ["push:1", "close:forced"])
        let later = Self.add([Self.push(3)], to: &outbox)
        #expect(later == [false])
        let rest = outbox.take()
        #expect(rest.isEmpty)
    }

    @Test("the connection's end hands back what was never taken, and nothing is taken after it")
    func finishLeavesTheRest() {
        var outbox = GatewayOutbox()
        let asked = Self.add([Self.push(1), Self.push(2)], to: &outbox)
        #expect(asked == [true, false])
        let left = outbox.finish()
        #expect(Self.numbers(left) == ["push:1", "push:2"])
        // The write that was due finds nothing.
        let taken = outbox.take()
        #expect(taken.isEmpty)
        let later = Self.add([Self.push(3)], to: &outbox)
        #expect(later == [false] && outbox.pending.isEmpty)
    }
}
