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
    let outbound: AsyncStream<Outbound>
    private let continuation: AsyncStream<Outbound>.Continuation
    /// Devices this connection holds online; the registry is the authority, this is its index.
    private let devices = Mutex<Set<DeviceAddress>>([])

    init(id: UInt64, mode: Mode) {
        self.id = id
        self.mode = mode
        (self.outbound, self.continuation) = AsyncStream.makeStream(bufferingPolicy: .unbounded)
    }

    func send(_ text: String) {
        continuation.yield(.text(text))
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
