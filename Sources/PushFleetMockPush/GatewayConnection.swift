import NIOCore
import NIOWebSocket
import PushFleetCore
import PushFleetWire
import Synchronization

/// One WebSocket connection of the device gateway, as the push service sees it.
///
/// Pushes handed to the connection wait in its outbox and are written on its channel's event
/// loop, in order, many to a flush: a provider request never waits on a device's socket, and a
/// push costs no task of its own (docs/performance.md, "The gateway's writes").
final class GatewayConnection: Sendable {
    /// Where the connection's frames go: its WebSocket channel, past the WebSocket handler
    /// (whole frames; the handler's own control frames go between them).
    struct Writer: Sendable {
        let channel: any Channel
        let now: @Sendable () -> Int64
        /// A push went out, at the instant its frame says.
        let written: @Sendable (PushFrame, Int64) -> Void
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
    private let outbox = Mutex(GatewayOutbox())
    /// Nil for a connection no channel carries (a test's): what it is handed stays in its outbox.
    private let writer: Writer?
    /// Set on the channel's loop at the first write (empty until then).
    private let sink: NIOLoopBoundBox<SinkState?>?

    private enum SinkState {
        case installed(GatewayFrameSink)
        /// The channel has no frame encoder to write below.
        case absent
    }
    /// Closes asked for, in the outbox's order, for the connection's task to carry out through the
    /// WebSocket handler (which owns the closing handshake).
    let closeRequests: AsyncStream<String>
    private let closeContinuation: AsyncStream<String>.Continuation
    /// Devices this connection holds online; the registry is the authority, this is its index.
    /// Sharded: a multiplexed connection may carry a whole fleet (ShardedDictionary).
    private let devices = Mutex(ShardedSet<DeviceAddress>())
    /// Pushes handed over and not yet written, while a run watches the service.
    private let unsent = Mutex<[UInt64: PushFrame]>([:])

    init(id: UInt64, mode: Mode, acks: Bool = false, writer: Writer? = nil) {
        self.id = id
        self.mode = mode
        self.acks = acks
        self.writer = writer
        self.sink = writer.map { .makeEmptyBox(valueType: SinkState.self, eventLoop: $0.channel.eventLoop) }
        (self.closeRequests, self.closeContinuation) = AsyncStream.makeStream(bufferingPolicy: .unbounded)
    }

    func send(_ text: String) {
        enqueue(.text(text))
    }

    /// A notice, written in one pass (``GatewayNotice/encodedJSON``): the gateway answers every
    /// batch of subscriptions with one.
    func send(_ notice: GatewayNotice) {
        send(notice.encodedJSON)
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
        enqueue(.push(push))
    }

    private func enqueue(_ item: GatewayOutbox.Item) {
        guard outbox.withLock({ $0.add(item) }), let writer else { return }
        writer.channel.eventLoop.execute { self.write(with: writer) }
    }

    /// On the channel's loop: writes what the outbox holds.
    private func write(with writer: Writer) {
        write(outbox.withLock { $0.take() }, with: writer)
    }

    /// On the channel's loop: writes `items`, flushes once, then reports the pushes written. A
    /// channel already closed writes nothing; the connection's end reports what it was handed
    /// and never wrote.
    private func write(_ items: some Collection<GatewayOutbox.Item>, with writer: Writer) {
        guard !items.isEmpty, writer.channel.isActive else { return }
        let sink = frameSink(writer)
        // The frames of one write go out in one flush: one instant is theirs, and no list of them
        // is kept for the reports after it.
        let writtenAt = writer.now()
        var pushes = 0
        var json = JSONBytes(capacity: 512)
        for item in items {
            switch item {
            case .text(let text):
                write(Array(text.utf8), sink, writer)
            case .push(var frame):
                frame.writtenAt = writtenAt
                json.bytes.removeAll(keepingCapacity: true)
                frame.encodeJSON(into: &json)
                write(json.bytes, sink, writer)
                pushes += 1
            case .close(let reason):
                closeContinuation.yield(reason)
            }
        }
        if sink?.flush() != true { writer.channel.flush() }
        guard pushes > 0 else { return }
        for case .push(var frame) in items {
            frame.writtenAt = writtenAt
            wrote(frame)
            writer.written(frame, writtenAt)
        }
    }

    /// The sink below the frame encoder, installed at the first write. On the channel's loop.
    private func frameSink(_ writer: Writer) -> GatewayFrameSink? {
        guard let sink else { return nil }
        switch sink.value {
        case .installed(let installed): return installed
        case .absent: return nil
        case nil:
            let installed = GatewayFrameSink.install(on: writer.channel)
            sink.value = installed.map { .installed($0) } ?? .absent
            return installed
        }
    }

    private func write(_ payload: [UInt8], _ sink: GatewayFrameSink?, _ writer: Writer) {
        let allocator = writer.channel.allocator
        if let sink, sink.write(GatewayFrameSink.textFrame(payload, allocator: allocator)) { return }
        writer.channel.write(WebSocketFrame(fin: true, opcode: .text, data: allocator.buffer(bytes: payload)), promise: nil)
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
    private func wrote(_ push: PushFrame) {
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
        enqueue(.close(reason: reason))
    }

    /// The connection ended: nothing more is written.
    func finish() {
        _ = outbox.withLock { $0.finish() }
        closeContinuation.finish()
    }

    func insert(_ address: DeviceAddress) {
        _ = devices.withLock { $0.insert(address) }
    }

    func remove(_ address: DeviceAddress) {
        _ = devices.withLock { $0.remove(address) }
    }

    /// Empties the index, returning what it held (used when the connection ends).
    func takeAll() -> [DeviceAddress] {
        devices.withLock { devices in
            defer { devices.removeAll() }
            return Array(devices)
        }
    }
}
