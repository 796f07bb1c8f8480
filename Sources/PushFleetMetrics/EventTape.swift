import Foundation
package import PushFleetCore
import Synchronization

/// A run's events as the recorder applied them, kept in a file so another process can replay
/// them: a shard's raw material, which `pushfleet merge` replays with the other shards' into one
/// recorder and judges as one run. Replaying a tape gives back exactly the recorder the run
/// had (the ledger's sends, eligibility spans, receipts, rejections, leaks, the push service's
/// reports; every histogram, counter and per-second bucket).
///
/// The format (docs/reports.md, "events.pftape"): the header — `PFTAPE`, a zero byte, the
/// format version (1), then the run id (a string), the shard's index and count, and the
/// origin: the run's first instant on its monotonic clock and the wall-clock time of that
/// instant (signed varints, nanoseconds) — then blocks, each a little-endian `UInt32` length
/// and that many bytes of whole records. A block is written only whole, so a shard killed while
/// writing loses at most its last block, and a reader sees that the tape was cut.
///
/// Records are a kind byte and fields: unsigned varints (LEB128), signed ones zig-zagged,
/// instants as signed varints relative to the origin, strings as a length and UTF-8 bytes,
/// repeated short strings (metric names, error classes, platforms, reasons) as symbols (0 and
/// the string defines the next number; n + 1 names symbol n), tokens as the plan's device
/// index + 1 (0 and the string for a token of no device).
package enum EventTape {
    package static let magic: [UInt8] = Array("PFTAPE".utf8) + [0]
    package static let version: UInt8 = 1
    /// The file's name in a shard's folder.
    package static let fileName = "events.pftape"
    /// A block is written once this much is buffered (and at the end).
    static let blockSize = 256 * 1024
    /// The longest a written event waits in the buffer while events keep coming (ns).
    static let blockInterval: Int64 = 1_000_000_000
    /// The largest block a reader takes: a length beyond it is damage, not data.
    static let maxBlock = 64 * 1024 * 1024

    /// What a tape says of itself.
    package struct Header: Sendable, Equatable {
        package var runID: String
        package var shard: Shard
        /// The run's first instant on its monotonic clock.
        package var originMonotonic: Int64
        /// Wall-clock nanoseconds since the Unix epoch at that instant.
        package var originWall: Int64

        package init(runID: String, shard: Shard, originMonotonic: Int64, originWall: Int64) {
            self.runID = runID
            self.shard = shard
            self.originMonotonic = originMonotonic
            self.originWall = originWall
        }
    }

    /// What writing a tape came to.
    package struct Summary: Sendable, Equatable {
        package var events = 0
        package var bytes = 0
        /// Why the tape stopped being written, when it did: the events after it are missing.
        package var failure: String?
    }
}

/// Writes a run's events to its tape as the recorder applies them, a block at a time, so the
/// tape costs the run one buffer, not memory that grows with the run.
package final class EventTapeWriter: Sendable {
    private struct State {
        var encoder: EventTapeEncoder?
        var handle: FileHandle?
        var summary = EventTape.Summary()
        /// When a block was last written (monotonic ns).
        var flushed: Int64 = 0
    }

    private let state: Mutex<State>
    package let path: String
    private let runID: String
    private let shard: Shard
    private let tokens: [String]

    /// Creates (or truncates) the file, so a place that cannot be written is known before the
    /// run; `tokens` are the plan's device tokens, by device index (empty for devices the tape
    /// will not name: another shard's, whose tokens are then written whole if ever).
    package init(path: String, runID: String, shard: Shard, tokens: [String]) throws {
        guard FileManager.default.createFile(atPath: path, contents: nil), let handle = FileHandle(forWritingAtPath: path) else {
            throw CocoaError(.fileWriteNoPermission, userInfo: [NSFilePathErrorKey: path])
        }
        self.path = path
        self.runID = runID
        self.shard = shard
        self.tokens = tokens
        state = Mutex(State(handle: handle))
    }

    /// Writes the header once the run knows its first instant; events before it are not kept.
    package func begin(originMonotonic: Int64, originWall: Int64) {
        state.withLock { state in
            guard state.encoder == nil, let handle = state.handle else { return }
            var encoder = EventTapeEncoder(origin: originMonotonic, tokens: tokens)
            var head = EventTape.magic + [EventTape.version]
            encoder.writeHeader(.init(runID: runID, shard: shard, originMonotonic: originMonotonic, originWall: originWall), into: &head)
            state.encoder = encoder
            do {
                try handle.write(contentsOf: head)
                state.summary.bytes += head.count
            } catch {
                state.summary.failure = "writing \(EventTape.fileName) failed: \(error)"
                state.handle = nil
            }
        }
    }

    /// Encodes a batch; writes a block when enough is buffered, or a second after the last one,
    /// so a run followed while it plays (`merge --follow`) sees its events within a second.
    package func append(_ events: [RunEvent]) {
        state.withLock { state in
            guard state.handle != nil, state.encoder != nil else { return }
            for event in events { state.encoder!.encode(event) }
            state.summary.events += events.count
            let now = MonotonicClock.nanoseconds()
            if state.encoder!.buffer.count >= EventTape.blockSize || now - state.flushed >= EventTape.blockInterval {
                Self.flush(&state)
                state.flushed = now
            }
        }
    }

    /// Writes what is buffered and closes the file; later appends are ignored.
    package func finish() -> EventTape.Summary {
        state.withLock { state in
            Self.flush(&state)
            try? state.handle?.close()
            state.handle = nil
            return state.summary
        }
    }

    private static func flush(_ state: inout State) {
        guard let handle = state.handle, let payload = state.encoder?.buffer, !payload.isEmpty else { return }
        state.encoder!.buffer.removeAll(keepingCapacity: true)
        let length = UInt32(payload.count)
        var block = [UInt8(length & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length >> 16 & 0xFF), UInt8(length >> 24)]
        block += payload
        do {
            // A local file: the write is a copy into the page cache, not a wait on the network.
            try handle.write(contentsOf: block)
            state.summary.bytes += block.count
        } catch {
            state.summary.failure = "writing \(EventTape.fileName) failed after \(state.summary.bytes) bytes: \(error)"
            try? handle.close()
            state.handle = nil
        }
    }
}
