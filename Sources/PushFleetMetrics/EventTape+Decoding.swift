import Foundation
import PushFleetCore
import PushFleetLedger

/// Reads a tape back into run events (``EventTape``). Every number is checked where it is
/// read: a damaged or foreign file is an error naming the byte, never a crash.
package struct EventTapeReader {
    package struct Damaged: Error, CustomStringConvertible {
        package var description: String
    }

    package private(set) var header = EventTape.Header(runID: "", shard: .whole, originMonotonic: 0, originWall: 0)
    /// The tape ended inside a block: the shard stopped while writing it.
    package private(set) var truncated = false
    private let bytes: [UInt8]
    private var position: Int
    private var blockEnd: Int
    private var symbols: [String] = []
    private let tokens: [String]
    private let devices: Int
    /// Users in the plan: a send's parties are range-checked against it.
    private let users: Int
    /// Added to every instant: the tape's origin moved onto the reader's time line.
    private var shift: Int64 = 0

    /// - Parameters:
    ///   - tokens: the plan's device tokens, by index (the tape names tokens by device).
    ///   - shift: what an instant relative to the tape's origin becomes on the caller's time
    ///     line (``header(of:)`` first, to learn the origin).
    package init(bytes: [UInt8], tokens: [String], users: Int = Int.max, shift: (EventTape.Header) -> Int64) throws(Damaged) {
        self.bytes = bytes
        self.tokens = tokens
        self.users = users
        self.devices = tokens.count
        position = 0
        blockEnd = bytes.count
        header = try Self.readHeader(&self)
        self.shift = shift(header)
        blockEnd = position
    }

    /// The header alone.
    package static func header(of bytes: [UInt8]) throws(Damaged) -> EventTape.Header {
        try EventTapeReader(bytes: bytes, tokens: [], shift: { _ in 0 }).header
    }

    private static func readHeader(_ reader: inout EventTapeReader) throws(Damaged) -> EventTape.Header {
        let head = EventTape.magic + [EventTape.version]
        guard reader.bytes.count >= head.count, Array(reader.bytes[0..<EventTape.magic.count]) == EventTape.magic else {
            throw Damaged(description: "not a pushfleet event tape (its first bytes are not PFTAPE)")
        }
        guard reader.bytes[EventTape.magic.count] == EventTape.version else {
            throw Damaged(description: "event tape format \(reader.bytes[EventTape.magic.count]); this pushfleet reads format \(EventTape.version)")
        }
        reader.position = head.count
        let run = try reader.string()
        let index = try reader.count(below: Shard.maxCount)
        let count = try reader.count(below: Shard.maxCount + 1)
        guard let shard = try? Shard(index: index, count: count) else { throw reader.damage("shard \(index)/\(count) is not a shard") }
        return EventTape.Header(runID: run, shard: shard, originMonotonic: try reader.signed(), originWall: try reader.signed())
    }

    /// The next event, or nil at the end of the tape (or where it was cut: ``truncated``).
    package mutating func next() throws(Damaged) -> RunEvent? {
        if position == blockEnd {
            guard position < bytes.count else { return nil }
            guard bytes.count - position >= 4 else {
                truncated = true
                return nil
            }
            let length = Int(bytes[position]) | Int(bytes[position + 1]) << 8 | Int(bytes[position + 2]) << 16 | Int(bytes[position + 3]) << 24
            guard length > 0, length <= EventTape.maxBlock else { throw damage("a block of \(length) bytes") }
            guard bytes.count - position - 4 >= length else {
                truncated = true
                position = bytes.count
                blockEnd = bytes.count
                return nil
            }
            position += 4
            blockEnd = position + length
        }
        return try event()
    }

    private mutating func event() throws(Damaged) -> RunEvent {
        let at = position
        guard let kind = EventTapeKind(rawValue: try byte()) else { throw Damaged(description: "\(EventTape.fileName): unknown record kind at byte \(at)") }
        switch kind {
        case .operation:
            return .operation(metric: try symbol(), nanoseconds: try signed(), failed: try bool(), at: try instant())
        case .error:
            return .error(ErrorClass.recorded(try symbol()), at: try instant())
        case .deviceReady:
            return .deviceReady(try device(), at: try instant())
        case .deviceFailed:
            return .deviceFailed(try device(), at: try instant())
        case .eligibility:
            return .eligibility(device: try device(), eligible: try bool(), since: try instant(), at: try instant())
        case .send:
            return .send(try send())
        case .sendDropped:
            return .sendDropped(at: try instant())
        case .senderLate:
            return .senderLate(lag: try signed())
        case .receipt:
            return .receipt(try receipt(), push: try optionalPush())
        case .pushReport:
            return .pushReport(try report())
        case .pushServiceView:
            switch try count(below: 2) {
            case 0: return .pushServiceView(.unknown(try string()))
            default:
                let since = try instant()
                var gaps: [Range<Int64>] = []
                for _ in 0..<(try count(below: remaining)) { gaps.append(try range()) }
                return .pushServiceView(.watched(since: since, gaps: gaps))
            }
        case .pushServiceGap:
            return .pushServiceGap(try range())
        case .rejection:
            return .rejection(DeliveryLedger.Rejection(device: try device(), refused: try attribution(), at: try instant(), push: try optionalPush()))
        case .probeLeak:
            return .probeLeak(DeliveryLedger.ProbeLeak(device: try device(), time: try instant(), detail: try string()))
        case .marker:
            return .marker(try string(), at: try instant())
        }
    }

    private mutating func send() throws(Damaged) -> DeliveryLedger.Send {
        let id = try count(below: Int.max)
        let from = try count(below: users)
        let to = try count(below: users)
        let kind = Scenario.Traffic.Kind.allCases[try count(below: Scenario.Traffic.Kind.allCases.count)]
        var platforms: [Scenario.PlatformName] = []
        for _ in 0..<(try count(below: Scenario.PlatformName.allCases.count + 1)) {
            platforms.append(Scenario.PlatformName.allCases[try count(below: Scenario.PlatformName.allCases.count)])
        }
        let intended = try instant()
        let start = try instant()
        let end = try instant()
        let flags = try count(below: 8)
        var send = DeliveryLedger.Send(
            id: id, from: from, to: to, kind: kind, platforms: platforms, intended: intended, start: start, end: end, succeeded: flags & 1 != 0,
            contentID: flags & 4 != 0 ? try string() : nil
        )
        send.answered = flags & 2 != 0
        return send
    }

    private mutating func receipt() throws(Damaged) -> DeliveryLedger.Receipt {
        let device = try device()
        let attribution = try attribution()
        let time = try instant()
        let content: DeliveryLedger.ContentCheck
        switch try count(below: 3) {
        case 0: content = .none
        case 1: content = .fetched(at: try instant())
        default: content = .failed(reason: try symbol())
        }
        let contentID = try count(below: 2) == 1 ? try string() : nil
        var path: DeliveryLedger.PushPath?
        if try count(below: 2) == 1 {
            let raw = (try word(), try word(), try word(), UInt8(try count(below: 8)))
            let context = raw.3 & 4 == 0 ? nil : DeliveryLedger.PushContext(low: try unsigned(), span: try unsigned())
            path = DeliveryLedger.PushPath(raw: raw, context: context?.span == 0 ? nil : context)
        }
        return DeliveryLedger.Receipt(device: device, attribution: attribution, time: time, content: content, contentID: contentID, path: path)
    }

    private mutating func report() throws(Damaged) -> PushReport {
        var hops: [PushHop] = []
        for _ in 0..<(try count(below: remaining)) { hops.append(try hop()) }
        var hub: [HubNote]?
        let notes = try count(below: remaining + 1)
        if notes > 0 {
            hub = []
            for _ in 0..<(notes - 1) {
                hub?.append(HubNote(at: try instant(), body: try string(), format: try symbol(), targets: try count(below: Int(Int32.max))))
            }
        }
        let lost = try count(below: Int.max)
        return PushReport(hops: hops, hub: hub, lost: lost == 0 ? nil : lost - 1)
    }

    private mutating func hop() throws(Damaged) -> PushHop {
        let push = try unsigned()
        let step = PushHop.Step.allCases[try count(below: PushHop.Step.allCases.count)]
        var hop = PushHop(push: push, step: step, at: try instant(), platform: try symbol(), token: try token())
        let present = try count(below: 512)
        if present & 1 != 0 { hop.pushType = try symbol() }
        if present & 2 != 0 { hop.body = try string() }
        if present & 4 != 0 { hop.base64 = try bool() }
        if present & 8 != 0 { hop.hubAt = try instant() }
        if present & 16 != 0 {
            let status = try signed()
            guard (0...9999).contains(status) else { throw damage("status \(status)") }
            hop.status = Int(status)
        }
        if present & 32 != 0 { hop.reason = try symbol() }
        if present & 64 != 0 { hop.delay = try signed() }
        if present & 128 != 0 { hop.then = try instant() }
        if present & 256 != 0 { hop.trace = try string() }
        return hop
    }

    private mutating func attribution() throws(Damaged) -> DeliveryLedger.Attribution {
        switch try count(below: 5) {
        case 0: .send(try count(below: Int.max))
        case 1: .otherRun
        case 2: .content(try string())
        case 3: .unattributable
        default: .undecryptable
        }
    }

    private mutating func optionalPush() throws(Damaged) -> UInt64? {
        try count(below: 2) == 1 ? try unsigned() : nil
    }

    // MARK: Fields

    private var remaining: Int { blockEnd - position }

    private func damage(_ what: String) -> Damaged {
        Damaged(description: "\(EventTape.fileName) is damaged at byte \(position): \(what)")
    }

    private mutating func byte() throws(Damaged) -> UInt8 {
        guard position < blockEnd else { throw damage("a record runs past its block") }
        defer { position += 1 }
        return bytes[position]
    }

    private mutating func unsigned() throws(Damaged) -> UInt64 {
        var value: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            let byte = try byte()
            guard shift < 64, !(shift == 63 && byte > 1) else { throw damage("a number longer than 64 bits") }
            value |= UInt64(byte & 0x7F) << shift
            if byte & 0x80 == 0 { return value }
            shift += 7
        }
    }

    private mutating func signed() throws(Damaged) -> Int64 {
        let raw = try unsigned()
        return Int64(bitPattern: raw >> 1) ^ -Int64(bitPattern: raw & 1)
    }

    /// A count or index below `limit`.
    private mutating func count(below limit: Int) throws(Damaged) -> Int {
        let value = try unsigned()
        guard value < UInt64(max(0, limit)) else { throw damage("\(value) where less than \(limit) was expected") }
        return Int(value)
    }

    private mutating func word() throws(Damaged) -> UInt32 {
        UInt32(try count(below: Int(UInt32.max) + 1))
    }

    private mutating func bool() throws(Damaged) -> Bool {
        switch try byte() {
        case 0: false
        case 1: true
        case let other: throw damage("\(other) where a flag was expected")
        }
    }

    /// How far from its origin a tape's instant may lie: a run's per-second tables are indexed
    /// by them, so an instant from a damaged tape must not claim the end of time.
    static let reach: Int64 = 31 * 86_400 * 1_000_000_000

    private mutating func instant() throws(Damaged) -> Int64 {
        let relative = try signed()
        guard relative >= -Self.reach, relative <= Self.reach else { throw damage("an instant \(relative / 1_000_000_000) s from the run's start") }
        return Saturating.add(relative, shift)
    }

    /// A span; its end may be open (a gap still open when the run ended).
    private mutating func range() throws(Damaged) -> Range<Int64> {
        let lower = try instant()
        let end = try signed()
        let upper = end > Self.reach ? Int64.max : Saturating.add(end, shift)
        guard lower <= upper else { throw damage("a span that ends before it starts") }
        return lower..<upper
    }

    private mutating func device() throws(Damaged) -> Int {
        try count(below: devices)
    }

    private mutating func string() throws(Damaged) -> String {
        let length = try count(below: Int.max)
        // After the length's own bytes: what is left of the block bounds it.
        guard length <= remaining else { throw damage("a string of \(length) bytes with \(remaining) left") }
        defer { position += length }
        return String(decoding: bytes[position..<(position + length)], as: UTF8.self)
    }

    private mutating func symbol() throws(Damaged) -> String {
        let number = try count(below: symbols.count + 1)
        if number > 0 { return symbols[number - 1] }
        let value = try string()
        symbols.append(value)
        return value
    }

    private mutating func token() throws(Damaged) -> String {
        let number = try count(below: tokens.count + 1)
        return number > 0 ? tokens[number - 1] : try string()
    }
}
