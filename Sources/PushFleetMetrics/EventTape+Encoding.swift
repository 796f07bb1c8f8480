import PushFleetCore
import PushFleetLedger

/// The record kinds of ``EventTape``; numbers are the format's, never reused.
enum EventTapeKind: UInt8 {
    case operation = 1, error, deviceReady, deviceFailed, eligibility, send, sendDropped, senderLate, receipt, pushReport
    case pushServiceView, pushServiceGap, rejection, probeLeak, marker
}

/// Encodes run events into tape records (``EventTape``).
struct EventTapeEncoder {
    var buffer: [UInt8] = []
    private let origin: Int64
    private let tokens: [String: Int]
    private var symbols: [String: Int] = [:]

    init(origin: Int64, tokens: [String]) {
        self.origin = origin
        var index: [String: Int] = [:]
        // An empty token is a device this tape never names (another shard's).
        for (device, token) in tokens.enumerated() where !token.isEmpty && index[token] == nil { index[token] = device }
        self.tokens = index
    }

    mutating func writeHeader(_ header: EventTape.Header, into bytes: inout [UInt8]) {
        swap(&buffer, &bytes)
        string(header.runID)
        unsigned(UInt64(header.shard.index))
        unsigned(UInt64(header.shard.count))
        signed(header.originMonotonic)
        signed(header.originWall)
        swap(&buffer, &bytes)
    }

    mutating func encode(_ event: RunEvent) {
        switch event {
        case .operation(let metric, let nanoseconds, let failed, let at):
            kind(.operation)
            symbol(metric)
            signed(nanoseconds)
            bool(failed)
            instant(at)
        case .error(let error, let at):
            kind(.error)
            symbol(error.label)
            instant(at)
        case .deviceReady(let device, let at):
            kind(.deviceReady)
            unsigned(UInt64(max(0, device)))
            instant(at)
        case .deviceFailed(let device, let at):
            kind(.deviceFailed)
            unsigned(UInt64(max(0, device)))
            instant(at)
        case .eligibility(let device, let eligible, let since, let at):
            kind(.eligibility)
            unsigned(UInt64(max(0, device)))
            bool(eligible)
            instant(since)
            instant(at)
        case .send(let send):
            kind(.send)
            self.send(send)
        case .sendDropped(let at):
            kind(.sendDropped)
            instant(at)
        case .senderLate(let lag):
            kind(.senderLate)
            signed(lag)
        case .receipt(let receipt, let push):
            kind(.receipt)
            self.receipt(receipt)
            optionalPush(push)
        case .pushReport(let report):
            kind(.pushReport)
            self.report(report)
        case .pushServiceView(let view):
            kind(.pushServiceView)
            switch view {
            case .unknown(let reason):
                unsigned(0)
                string(reason)
            case .watched(let since, let gaps):
                unsigned(1)
                instant(since)
                unsigned(UInt64(gaps.count))
                for gap in gaps { range(gap) }
            }
        case .pushServiceGap(let gap):
            kind(.pushServiceGap)
            range(gap)
        case .rejection(let rejection):
            kind(.rejection)
            unsigned(UInt64(max(0, rejection.device)))
            attribution(rejection.attribution)
            instant(rejection.time)
            optionalPush(rejection.push)
        case .probeLeak(let leak):
            kind(.probeLeak)
            unsigned(UInt64(max(0, leak.device)))
            instant(leak.time)
            string(leak.detail)
        case .marker(let label, let at):
            kind(.marker)
            string(label)
            instant(at)
        }
    }

    private mutating func send(_ send: DeliveryLedger.Send) {
        unsigned(UInt64(max(0, send.id)))
        unsigned(UInt64(max(0, send.from)))
        unsigned(UInt64(max(0, send.to)))
        unsigned(UInt64(Scenario.Traffic.Kind.allCases.firstIndex(of: send.kind) ?? 0))
        unsigned(UInt64(send.platforms.count))
        for platform in send.platforms { unsigned(UInt64(Scenario.PlatformName.allCases.firstIndex(of: platform) ?? 0)) }
        instant(send.intended)
        instant(send.start)
        instant(send.end)
        unsigned((send.succeeded ? 1 : 0) | (send.answered ? 2 : 0) | (send.contentID != nil ? 4 : 0))
        if let contentID = send.contentID { string(contentID) }
    }

    private mutating func receipt(_ receipt: DeliveryLedger.Receipt) {
        unsigned(UInt64(max(0, receipt.device)))
        attribution(receipt.attribution)
        instant(receipt.time)
        switch receipt.content {
        case .none: unsigned(0)
        case .fetched(let at):
            unsigned(1)
            instant(at)
        case .failed(let reason):
            unsigned(2)
            symbol(reason)
        }
        if let contentID = receipt.contentID {
            unsigned(1)
            string(contentID)
        } else {
            unsigned(0)
        }
        if let path = receipt.path {
            let raw = path.raw
            unsigned(1)
            unsigned(UInt64(raw.accepted))
            unsigned(UInt64(raw.written))
            unsigned(UInt64(raw.hub))
            // Bit 4: the provider request's trace context follows (tapes without it still read).
            if let context = path.context {
                unsigned(UInt64(raw.flags | 4))
                unsigned(context.low)
                unsigned(context.span)
            } else {
                unsigned(UInt64(raw.flags))
            }
        } else {
            unsigned(0)
        }
    }

    private mutating func report(_ report: PushReport) {
        unsigned(UInt64(report.hops.count))
        for hop in report.hops { self.hop(hop) }
        let notes = report.hub ?? []
        unsigned(report.hub == nil ? 0 : UInt64(notes.count) + 1)
        for note in notes {
            instant(note.at)
            string(note.body)
            symbol(note.format)
            unsigned(UInt64(max(0, note.targets)))
        }
        unsigned(report.lost.map { UInt64(max(0, $0)) + 1 } ?? 0)
    }

    private mutating func hop(_ hop: PushHop) {
        unsigned(hop.push)
        unsigned(UInt64(PushHop.Step.allCases.firstIndex(of: hop.step) ?? 0))
        instant(hop.at)
        symbol(hop.platform)
        token(hop.token)
        var present: UInt64 = 0
        if hop.pushType != nil { present |= 1 }
        if hop.body != nil { present |= 2 }
        if hop.base64 != nil { present |= 4 }
        if hop.hubAt != nil { present |= 8 }
        if hop.status != nil { present |= 16 }
        if hop.reason != nil { present |= 32 }
        if hop.delay != nil { present |= 64 }
        if hop.then != nil { present |= 128 }
        if hop.trace != nil { present |= 256 }
        unsigned(present)
        if let pushType = hop.pushType { symbol(pushType) }
        if let body = hop.body { string(body) }
        if let base64 = hop.base64 { bool(base64) }
        if let hubAt = hop.hubAt { instant(hubAt) }
        if let status = hop.status { signed(Int64(status)) }
        if let reason = hop.reason { symbol(reason) }
        if let delay = hop.delay { signed(delay) }
        if let then = hop.then { instant(then) }
        if let trace = hop.trace { string(trace) }
    }

    private mutating func attribution(_ attribution: DeliveryLedger.Attribution) {
        switch attribution {
        case .send(let id):
            unsigned(0)
            unsigned(UInt64(max(0, id)))
        case .otherRun: unsigned(1)
        case .content(let id):
            unsigned(2)
            string(id)
        case .unattributable: unsigned(3)
        case .undecryptable: unsigned(4)
        }
    }

    private mutating func optionalPush(_ push: UInt64?) {
        if let push {
            unsigned(1)
            unsigned(push)
        } else {
            unsigned(0)
        }
    }

    // MARK: Fields

    private mutating func kind(_ kind: EventTapeKind) { buffer.append(kind.rawValue) }

    mutating func unsigned(_ value: UInt64) {
        var value = value
        while value >= 0x80 {
            buffer.append(UInt8(value & 0x7F) | 0x80)
            value >>= 7
        }
        buffer.append(UInt8(value))
    }

    mutating func signed(_ value: Int64) {
        unsigned(UInt64(bitPattern: (value << 1) ^ (value >> 63)))
    }

    private mutating func instant(_ value: Int64) { signed(Saturating.subtract(value, origin)) }

    private mutating func range(_ range: Range<Int64>) {
        instant(range.lowerBound)
        instant(range.upperBound)
    }

    private mutating func bool(_ value: Bool) { buffer.append(value ? 1 : 0) }

    mutating func string(_ value: String) {
        let bytes = value.utf8
        unsigned(UInt64(bytes.count))
        buffer.append(contentsOf: bytes)
    }

    private mutating func symbol(_ value: String) {
        if let number = symbols[value] {
            unsigned(UInt64(number) + 1)
        } else {
            symbols[value] = symbols.count
            unsigned(0)
            string(value)
        }
    }

    private mutating func token(_ value: String) {
        if let device = tokens[value] {
            unsigned(UInt64(device) + 1)
        } else {
            unsigned(0)
            string(value)
        }
    }
}
