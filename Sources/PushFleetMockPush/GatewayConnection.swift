import NIOCore
import PushFleetWire
import Synchronization

/// One WebSocket connection of the device gateway, as the push service sees it.
///
/// Pushes are handed to the connection through an unbounded stream and written by the
/// connection's own task, so a provider request never waits on a device's socket.
final class GatewayConnection: Sendable {
    enum Outbound: Sendable {
        case text(String)
        /// A push, encoded when it is written (the frame then says when).
        case push(PushFrame)
        /// Close a single-device connection (forced disconnect).
        case close(reason: String)
    }

    enum Mode: Sendable {
        /// `/device`: the connection is its device; taking the device offline closes it.
        case single(DeviceAddress)
        /// `/gateway`: devices come and go by subscription; the connection stays.
        case multiplexed
    }

    let id: UInt64
    let mode: Mode
    /// The device acknowledges each push (`ack=1`): until it does, a push stays the service's,
    /// and goes back to the hold should the connection end first, as a real platform's would.
    let acks: Bool
    /// Pushes handed to an acknowledging connection and not yet acknowledged, with when each
    /// stops being worth holding (nil: never held).
    private let unacked = Mutex<[UInt64: (frame: PushFrame, expiresAt: Int64?)]>([:])
    /// Unacknowledged pushes kept per connection at most: a device that asked for acknowledgement
    /// and never gives it cannot grow the service without bound; past it the oldest is let go.
    static let maxUnacknowledged = 1024
    let outbound: AsyncStream<Outbound>
    private let continuation: AsyncStream<Outbound>.Continuation
    /// Devices this connection holds online; the registry is the authority, this is its index.
    private let devices = Mutex<Set<DeviceAddress>>([])
    /// Pushes handed over and not yet written, while a run watches the service.
    private let unsent = Mutex<[UInt64: PushFrame]>([:])

    init(id: UInt64, mode: Mode, acks: Bool = false) {
        self.id = id
        self.mode = mode
        self.acks = acks
        (self.outbound, self.continuation) = AsyncStream.makeStream(bufferingPolicy: .unbounded)
    }

    func send(_ text: String) {
        continuation.yield(.text(text))
    }

    /// Hands a push to the connection's writer; with `tracked`, one the connection closes on
    /// before writing is given back by ``takeUnsent()``.
    func send(_ push: PushFrame, tracked: Bool, expiresAt: Int64?) {
        if acks, let number = push.push {
            // Kept until acknowledged, which covers a push never written as well.
            unacked.withLock { unacked in
                unacked[number] = (push, expiresAt)
                if unacked.count > Self.maxUnacknowledged, let oldest = unacked.keys.min() { unacked[oldest] = nil }
            }
        } else if tracked, let number = push.push {
            unsent.withLock { $0[number] = push }
        }
        continuation.yield(.push(push))
    }

    /// The device has these pushes.
    func acknowledged(_ numbers: [UInt64]) {
        unacked.withLock { unacked in
            for number in numbers { unacked[number] = nil }
        }
    }

    /// Pushes the device never acknowledged, in the order the service numbered them.
    func takeUnacknowledged() -> [(frame: PushFrame, expiresAt: Int64?)] {
        unacked.withLock { unacked in
            defer { unacked = [:] }
            return unacked.sorted { $0.key < $1.key }.map(\.value)
        }
    }

    /// The push went out.
    func wrote(_ push: PushFrame) {
        guard let number = push.push else { return }
        unsent.withLock { unsent in
            if !unsent.isEmpty { unsent[number] = nil }
        }
    }

    /// Tracked pushes handed over and never written (the connection closed first).
    func takeUnsent() -> [PushFrame] {
        unsent.withLock { unsent in
            defer { unsent = [:] }
            return Array(unsent.values)
        }
    }

    func close(reason: String) {
        continuation.yield(.close(reason: reason))
    }

    func finish() {
        continuation.finish()
    }

    func insert(_ address: DeviceAddress) {
        _ = devices.withLock { $0.insert(address) }
    }

    func remove(_ address: DeviceAddress) {
        _ = devices.withLock { $0.remove(address) }
    }

    /// Empties the index, returning what it held (used when the connection ends).
    func takeAll() -> Set<DeviceAddress> {
        devices.withLock { devices in
            defer { devices = [] }
            return devices
        }
    }
}
