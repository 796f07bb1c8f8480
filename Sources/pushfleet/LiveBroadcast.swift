import NIOCore
import PushFleetCore
import Synchronization

/// The live page's stream to every browser watching (``LiveSubscribers`` decides; this only
/// carries out its actions): each browser a bounded queue, a slow one dropped, never waited for.
final class LiveBroadcast: Sendable {
    private struct State {
        var subscribers: LiveSubscribers<ByteBuffer>
        var streams: [Int: AsyncStream<ByteBuffer>.Continuation] = [:]
        var latest: ByteBuffer?
    }

    private let state: Mutex<State>

    init(capacity: Int = 64, historyLimit: Int = 3600) {
        state = Mutex(State(subscribers: LiveSubscribers(capacity: capacity, historyLimit: historyLimit)))
    }

    /// What a browser is told first: the run and its rules.
    func open(_ event: ByteBuffer) {
        state.withLock { state in Self.perform(state.subscribers.open(event), on: &state) }
    }

    /// An event for every browser (kept in the history); a frame's `json` is also served alone
    /// at `/frame`.
    func publish(_ event: ByteBuffer, json: ByteBuffer? = nil) {
        state.withLock { state in
            if let json { state.latest = json }
            Self.perform(state.subscribers.publish(event), on: &state)
        }
    }

    /// The verdict: every browser gets it and its stream ends.
    func close(_ event: ByteBuffer) {
        state.withLock { state in Self.perform(state.subscribers.close(event), on: &state) }
    }

    var latest: ByteBuffer? { state.withLock { $0.latest } }

    var subscribers: Int { state.withLock { $0.subscribers.subscribers } }

    /// A new browser: what to write first, and the stream of what follows (nil once the run has ended).
    func subscribe() -> (id: Int, backlog: [ByteBuffer], stream: AsyncStream<ByteBuffer>?) {
        state.withLock { state in
            let joined = state.subscribers.join()
            guard !joined.finished else { return (joined.id, joined.backlog, nil) }
            // One more than the queue's bound: the verdict is written to a full queue too.
            let (stream, continuation) = AsyncStream.makeStream(of: ByteBuffer.self, bufferingPolicy: .bufferingOldest(state.subscribers.capacity + 1))
            state.streams[joined.id] = continuation
            return (joined.id, joined.backlog, stream)
        }
    }

    func written(_ id: Int) {
        state.withLock { $0.subscribers.written(id) }
    }

    func leave(_ id: Int) {
        let continuation = state.withLock { state in
            state.subscribers.leave(id)
            return state.streams.removeValue(forKey: id)
        }
        continuation?.finish()
    }

    private static func perform(_ actions: [LiveSubscribers<ByteBuffer>.Action], on state: inout State) {
        for action in actions {
            switch action {
            case .write(let id, let message): state.streams[id]?.yield(message)
            case .drop(let id), .finish(let id): state.streams.removeValue(forKey: id)?.finish()
            }
        }
    }

    /// One Server-Sent Events message.
    static func event(_ name: String, data: some Collection<UInt8>) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.reserveCapacity(data.count + name.utf8.count + 16)
        buffer.writeString("event: \(name)\ndata: ")
        buffer.writeBytes(data)
        buffer.writeString("\n\n")
        return buffer
    }
}
