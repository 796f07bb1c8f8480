package import HTTPTypes
package import NIOCore
import NIOHPACK

/// The bytes of an HTTP/2 server connection before NIO's HTTP/2 handler sees them: requests the
/// responder claims are answered here, from the frames, and everything else goes on to NIO's
/// handler as bytes. A pure machine: bytes in; bytes for NIO (``forward``), bytes for the client
/// (``output``) and requests to answer out.
///
/// NIO's handler runs a stream state machine, flow control and a frame encoder for every stream;
/// for a provider request answered in the read that brought it, that was three quarters of the
/// push service's CPU on h2c (docs/performance-servers.md). Here such a request costs its frames'
/// headers, its header block's decoding and one HEADERS frame written back. What keeps the two
/// sides of the connection consistent:
/// - HPACK: every request header block is decoded here, so the client's table stays this
///   decoder's; a block that goes on to NIO is encoded again by this machine's own encoder, whose
///   table NIO's decoder mirrors. An answer written here refers to no dynamic table entry and adds
///   none, so it leaves the client's decoder as NIO's encoder expects it.
/// - Streams: NIO sees only the streams it is given, in increasing order (a held stream goes on
///   before any higher one). Streams answered here are closed ones to NIO once it has seen a higher
///   one; until then their late frames are dropped here, or refused as NIO would.
/// - Flow control: answers written here have no DATA frame, so nothing written here takes the
///   client's window. An answer with a body goes to NIO's handler with its stream, the answer
///   decided already (the caller keeps it for the frame routes after NIO's handler). Request bytes
///   consumed here are given back to the connection's window by this machine.
/// - A client that lowers its HPACK table's size (SETTINGS_HEADER_TABLE_SIZE below what it said
///   before, 4,096 at first) expects a size update at the start of the next block it is sent,
///   which only NIO's encoder writes; from then on nothing is answered here.
package struct HTTP2ConnectionFrontState {
    /// What the caller must do before reading on.
    package enum Event {
        /// A claimed request ended: answer it (``answered(_:_:)``) or hand it on (``handOver(_:)``).
        case answer(UInt32, EventLoopRoute, HTTPRequest, ByteBuffer)
        /// A connection error (RFC 9113 §5.4.1): GOAWAY with this code is in ``output``; write it and close.
        case fail(UInt32)
    }

    package enum ErrorCode {
        static let protocolError: UInt32 = 0x1
        static let internalError: UInt32 = 0x2
        static let frameSizeError: UInt32 = 0x6
        static let streamClosed: UInt32 = 0x5
        static let compressionError: UInt32 = 0x9
        static let enhanceYourCalm: UInt32 = 0xB
    }

    /// NIO's defaults, which the connection advertises: SETTINGS_MAX_FRAME_SIZE and
    /// SETTINGS_MAX_HEADER_LIST_SIZE, and its cap on CONTINUATION frames in a row.
    static let maxFrameSize = 16_384
    static let maxHeaderBlock = 16_384
    static let maxContinuations = 5
    /// SETTINGS_MAX_CONCURRENT_STREAMS as NIO advertises it: more claimed streams held at once go to NIO.
    static let maxHeld = 100
    /// Consumed request bytes given back to the connection's window once this many have gathered.
    static let refundThreshold = 16_384

    private static let preface: [UInt8] = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)

    enum Phase {
        case preface, frames, passthrough, failed
    }

    /// A frame of a held stream, replayed to NIO if the stream is handed on.
    enum Item {
        case headers(HPACKHeaders, endStream: Bool)
        case raw(ByteBuffer)
    }

    struct Held {
        var stream: UInt32
        var route: EventLoopRoute
        var head: HTTPRequest
        var body: ByteBuffer?
        var items: [Item]
        /// DATA frames' lengths, padding included: what flow control counted.
        var consumed = 0
    }

    /// A header block whose CONTINUATION frames are still to come.
    struct Block {
        var stream: UInt32
        var endStream: Bool
        var fragment: ByteBuffer
        var continuations = 0
    }

    var phase = Phase.preface
    var pending: ByteBuffer?
    var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
    var encoder = HPACKEncoder(allocator: ByteBufferAllocator(), useHuffmanEncoding: false)
    /// Claimed streams whose request has not ended, lowest first: a new one is always the
    /// highest, and they are few (``maxHeld``), so an array searched from its end.
    var held: [Held] = []
    var block: Block?
    /// The highest client stream opened, here or at NIO.
    var highestSeen: UInt32 = 0
    /// The highest stream NIO was given: one below it that NIO never saw is a closed one to NIO.
    var highestGiven: UInt32 = 0
    var unrefunded = 0
    var tableShrunk = false
    /// The client's last SETTINGS_HEADER_TABLE_SIZE.
    var clientTableSize: UInt32 = 4096
    /// False once the server is stopping: every new stream goes to NIO, which refuses it after its GOAWAY.
    package var claiming = true
    /// Bytes for NIO's handler, in order.
    package var forward: ByteBuffer
    /// Bytes for the client: answers, window updates, a GOAWAY.
    package var output: ByteBuffer
    /// Requests answered here so far.
    package private(set) var answeredCount = 0

    package init(allocator: ByteBufferAllocator = ByteBufferAllocator()) {
        forward = allocator.buffer(capacity: 0)
        output = allocator.buffer(capacity: 0)
    }

    /// Streams held (claimed, their request not yet ended).
    package var heldStreams: Int { held.count }

    /// Set by a connection error: the GOAWAY is in ``output``; nothing more is read.
    package var failed: Bool { phase == .failed }

    /// Bytes read from the connection.
    package mutating func receive(_ bytes: ByteBuffer) {
        if pending == nil || pending!.readableBytes == 0 {
            pending = bytes
        } else {
            var bytes = bytes
            pending!.writeBuffer(&bytes)
        }
    }

    /// Reads frames until a request must be answered or the bytes run out (nil).
    package mutating func next(claim: (HTTPRequest) -> EventLoopRoute?) -> Event? {
        guard var bytes = pending else { return nil }
        pending = nil
        defer { pending = bytes.readableBytes > 0 ? bytes : nil }
        if phase == .preface {
            let count = min(bytes.readableBytes, Self.preface.count)
            guard bytes.readableBytesView.prefix(count).elementsEqual(Self.preface.prefix(count)) else {
                // Not HTTP/2: NIO's handler refuses it.
                phase = .passthrough
                forward.writeBuffer(&bytes)
                return nil
            }
            guard count == Self.preface.count else { return nil }
            var preface = bytes.readSlice(length: count)!
            forward.writeBuffer(&preface)
            phase = .frames
        }
        switch phase {
        case .passthrough:
            forward.writeBuffer(&bytes)
            return nil
        case .failed:
            bytes.moveReaderIndex(to: bytes.writerIndex)
            return nil
        case .preface, .frames:
            break
        }
        while bytes.readableBytes >= 9 {
            let start = bytes.readerIndex
            let word = bytes.getInteger(at: start, as: UInt32.self)!
            let length = Int(word >> 8)
            guard length <= Self.maxFrameSize else { return fail(ErrorCode.frameSizeError) }
            guard bytes.readableBytes >= 9 + length else { break }
            let type = UInt8(truncatingIfNeeded: word)
            let flags = bytes.getInteger(at: start + 4, as: UInt8.self)!
            let stream = bytes.getInteger(at: start + 5, as: UInt32.self)! & 0x7FFF_FFFF
            let raw = bytes.readSlice(length: 9 + length)!
            if let event = frame(type: type, flags: flags, stream: stream, raw: raw, claim: claim) { return event }
        }
        return nil
    }

    /// The claimed request was answered: its answer written as one HEADERS frame. False when it
    /// cannot be written here (a body, or a block past one frame): hand the stream on with
    /// ``handOver(_:)`` and let NIO's side write the answer.
    package mutating func answered(_ id: UInt32, _ answer: CompleteResponse) -> Bool {
        guard answer.body.readableBytes == 0, let index = heldIndex(id) else { return false }
        let start = output.writerIndex
        output.writeInteger(UInt32(0))
        output.writeInteger(UInt8(0x5))  // END_STREAM | END_HEADERS
        output.writeInteger(id)
        HTTP2AnswerBlock.write(answer, to: &output)
        let length = output.writerIndex - start - 9
        guard length <= Self.maxFrameSize else {
            output.moveWriterIndex(to: start)
            return false
        }
        output.setInteger(UInt32(length) << 8 | 0x1, at: start)
        unrefunded += held.remove(at: index).consumed
        answeredCount += 1
        return true
    }

    /// The claimed stream goes on to NIO's handler, with every held stream below it first.
    package mutating func handOver(_ id: UInt32) {
        while let first = held.first, first.stream <= id { giveFirst() }
    }

    /// The read completed: streams whose request is still open go on to NIO's handler (where a
    /// slow body meets its timeout and cap), and consumed bytes are given back when enough have
    /// gathered.
    package mutating func readComplete() {
        while !held.isEmpty { giveFirst() }
        if unrefunded >= Self.refundThreshold {
            writeWindowUpdate(UInt32(unrefunded))
            unrefunded = 0
        }
    }

    // MARK: - Frames

    private mutating func frame(type: UInt8, flags: UInt8, stream: UInt32, raw: ByteBuffer, claim: (HTTPRequest) -> EventLoopRoute?) -> Event? {
        if let block, type != 0x9 || stream != block.stream {
            // Nothing but the block's CONTINUATION may come between its frames (RFC 9113 §6.10).
            return fail(ErrorCode.protocolError)
        }
        switch type {
        case 0x1:  // HEADERS
            guard stream != 0 else { return fail(ErrorCode.protocolError) }
            var payload = raw.getSlice(at: raw.readerIndex + 9, length: raw.readableBytes - 9)!
            guard Self.stripPadding(&payload, flags: flags) else { return fail(ErrorCode.protocolError) }
            if flags & 0x20 != 0 {
                guard payload.readableBytes >= 5 else { return fail(ErrorCode.protocolError) }
                payload.moveReaderIndex(forwardBy: 5)
            }
            if flags & 0x4 == 0 {
                block = Block(stream: stream, endStream: flags & 0x1 != 0, fragment: payload)
                return nil
            }
            return headerBlock(stream, endStream: flags & 0x1 != 0, &payload, claim: claim)
        case 0x9:  // CONTINUATION
            guard var continued = block else { return fail(ErrorCode.protocolError) }
            continued.continuations += 1
            var payload = raw.getSlice(at: raw.readerIndex + 9, length: raw.readableBytes - 9)!
            guard continued.continuations <= Self.maxContinuations,
                continued.fragment.readableBytes + payload.readableBytes <= Self.maxHeaderBlock
            else { return fail(ErrorCode.enhanceYourCalm) }
            continued.fragment.writeBuffer(&payload)
            guard flags & 0x4 != 0 else {
                block = continued
                return nil
            }
            block = nil
            return headerBlock(stream, endStream: continued.endStream, &continued.fragment, claim: claim)
        case 0x0:  // DATA
            if let index = heldIndex(stream) { return data(index, flags: flags, raw: raw) }
            if isClosedHere(stream) { return fail(ErrorCode.streamClosed) }
        case 0x3:  // RST_STREAM
            let index = heldIndex(stream)
            if raw.readableBytes != 13, index != nil || isClosedHere(stream) { return fail(ErrorCode.frameSizeError) }
            if let index {
                unrefunded += held.remove(at: index).consumed
                return nil
            }
            if isClosedHere(stream) { return nil }
        case 0x2, 0x8:  // PRIORITY, WINDOW_UPDATE
            let index = stream == 0 ? nil : heldIndex(stream)
            if stream != 0, raw.readableBytes != (type == 0x2 ? 14 : 13), index != nil || isClosedHere(stream) {
                return fail(ErrorCode.frameSizeError)
            }
            if let index {
                held[index].items.append(.raw(raw))
                return nil
            }
            if stream != 0, isClosedHere(stream) { return nil }
        case 0x4 where flags & 0x1 == 0:  // SETTINGS
            settings(raw)
        default:
            break
        }
        var raw = raw
        forward.writeBuffer(&raw)
        return nil
    }

    /// A whole header block: a new stream's request, a held stream's trailers, or a block for NIO.
    private mutating func headerBlock(_ stream: UInt32, endStream: Bool, _ fragment: inout ByteBuffer, claim: (HTTPRequest) -> EventLoopRoute?) -> Event? {
        guard let fields = try? decoder.decodeHeaders(from: &fragment) else { return fail(ErrorCode.compressionError) }
        if let index = heldIndex(stream) {
            // Trailers end the request; anything else about them is NIO's side's to judge.
            held[index].items.append(.headers(fields, endStream: endStream))
            guard endStream, HTTP2HeaderBlockRules.isValidTrailers(fields) else {
                handOver(stream)
                return nil
            }
            return requestEnded(index)
        }
        if stream <= highestSeen {
            // A block on a stream already opened: NIO's, or one answered here and closed, which NIO
            // would refuse as a stream ID too small.
            if isClosedHere(stream) { return fail(ErrorCode.protocolError) }
            give(stream, fields, endStream: endStream)
            return nil
        }
        let isClient = stream % 2 == 1
        if isClient { highestSeen = stream }
        if isClient, claiming, !tableShrunk, held.count < Self.maxHeld, HTTP2HeaderBlockRules.isValidRequest(fields),
            let head = HTTPRequest(http2: fields), let route = claim(head)
        {
            held.append(Held(stream: stream, route: route, head: head, items: [.headers(fields, endStream: endStream)]))
            return endStream ? requestEnded(held.count - 1) : nil
        }
        // NIO must see streams in order: every held one is below this one.
        if !held.isEmpty { handOver(stream) }
        give(stream, fields, endStream: endStream)
        return nil
    }

    private mutating func data(_ index: Int, flags: UInt8, raw: ByteBuffer) -> Event? {
        var payload = raw.getSlice(at: raw.readerIndex + 9, length: raw.readableBytes - 9)!
        let length = payload.readableBytes
        guard Self.stripPadding(&payload, flags: flags) else { return fail(ErrorCode.protocolError) }
        held[index].items.append(.raw(raw))
        held[index].consumed += length
        let total = (held[index].body?.readableBytes ?? 0) + payload.readableBytes
        if total > held[index].route.bodyLimit {
            // Past the route's limit: NIO's side answers it (413) as it would any stream.
            handOver(held[index].stream)
            return nil
        }
        if payload.readableBytes > 0 {
            if held[index].body == nil {
                held[index].body = payload
            } else {
                held[index].body!.writeBuffer(&payload)
            }
        }
        return flags & 0x1 != 0 ? requestEnded(index) : nil
    }

    private mutating func requestEnded(_ index: Int) -> Event? {
        let request = held[index]
        let body = request.body ?? ByteBuffer()
        // A body that disagrees with its declared length is malformed (RFC 9113 §8.1.1): NIO's
        // handler resets the stream.
        if let declared = request.head.headerFields[.contentLength], Int(declared) != body.readableBytes {
            handOver(request.stream)
            return nil
        }
        return .answer(request.stream, request.route, request.head, body)
    }

    private mutating func settings(_ raw: ByteBuffer) {
        var payload = raw.getSlice(at: raw.readerIndex + 9, length: raw.readableBytes - 9)!
        while payload.readableBytes >= 6 {
            let id = payload.readInteger(as: UInt16.self)!
            let value = payload.readInteger(as: UInt32.self)!
            if id == 0x1 {
                if value < clientTableSize { tableShrunk = true }
                clientTableSize = value
            }
        }
    }

    /// A stream at or below the highest opened that is neither held nor NIO's: closed here.
    private func isClosedHere(_ stream: UInt32) -> Bool {
        stream % 2 == 1 && stream > highestGiven && stream <= highestSeen && heldIndex(stream) == nil
    }

    func heldIndex(_ stream: UInt32) -> Int? {
        held.lastIndex { $0.stream == stream }
    }
}
