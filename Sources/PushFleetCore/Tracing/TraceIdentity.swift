import Foundation

/// The W3C Trace Context identity of a request pushfleet makes: a send starts its push's trace,
/// and each device request starts one of its own. Ids derive from the run id and the send id (or
/// the device and the request's number), never from a random draw, so every shard of a run and
/// every rerun of a report names the same trace for the same send (docs/tracing.md).
public struct TraceIdentity: Sendable, Hashable {
    /// The trace id's two halves, most significant first.
    public var high: UInt64
    public var low: UInt64
    /// The id of the span the request is made under: the parent of the server's span.
    public var span: UInt64

    public init(high: UInt64, low: UInt64, span: UInt64) {
        self.high = high
        self.low = low
        self.span = span
    }

    /// The trace of a send's push: its request, the backend's spans under it, the push service's
    /// and the device's.
    public static func send(run: String, id: Int) -> TraceIdentity {
        TraceRoot(run: run).send(id)
    }

    /// The trace of a device's own request (``TraceRoot/device(_:request:)``).
    public static func device(run: String, device: Int, request: Int) -> TraceIdentity {
        TraceRoot(run: run).device(device, request: request)
    }

    /// A `traceparent` read as the W3C rules read version 00: 55 characters, lower-case hex, no
    /// all-zero id, flags of two hex digits (kept only as sampled or not). Nil for anything else.
    public init?(traceparent text: String) {
        var text = text
        guard let parsed = text.withUTF8({ bytes -> TraceIdentity? in
            guard bytes.count == 55, bytes[0] == 0x30, bytes[1] == 0x30, bytes[2] == 0x2D, bytes[35] == 0x2D, bytes[52] == 0x2D else { return nil }
            guard let high = Self.number(bytes, 3), let low = Self.number(bytes, 19), let span = Self.number(bytes, 36),
                Self.number(bytes, 53, digits: 2) != nil, high | low != 0, span != 0
            else { return nil }
            return TraceIdentity(high: high, low: low, span: span)
        }) else { return nil }
        self = parsed
    }

    /// Whether a `traceparent` this type reads says its caller sampled the trace (the flags' low
    /// bit), as a parent-based sampler decides whether to record.
    public static func sampled(_ traceparent: String) -> Bool {
        guard let last = traceparent.utf8.last, let nibble = Hex.value(last) else { return false }
        return nibble & 1 == 1
    }

    /// Lower-case hex only: version 00 forbids upper-case digits.
    private static func number(_ bytes: UnsafeBufferPointer<UInt8>, _ start: Int, digits: Int = 16) -> UInt64? {
        var value: UInt64 = 0
        for byte in bytes[start..<(start + digits)] {
            guard !(UInt8(ascii: "A")...UInt8(ascii: "F")).contains(byte), let nibble = Hex.value(byte) else { return nil }
            value = value << 4 | UInt64(nibble)
        }
        return value
    }

    /// The same trace, under a span derived from this one's and `salt` (a device's receipt of a
    /// push, under the span its provider request was made in: the salt is the device's number).
    public func child(_ salt: UInt64) -> TraceIdentity {
        var mix = SplitMix64(seed: span ^ (salt &* 0xA24B_AED4_963E_E407) ^ low)
        let child = mix.next()
        return TraceIdentity(high: high, low: low, span: child == 0 ? 1 : child)
    }

    /// 32 lower-case hex digits.
    public var traceID: String { Self.text { Self.put(high, &$0); Self.put(low, &$0) } }

    /// 16 lower-case hex digits.
    public var spanID: String { Self.text { Self.put(span, &$0) } }

    /// The `traceparent` header's value: version 00, sampled, so that a backend whose sampler
    /// follows its parent records the spans the run may ask for. Written byte by byte: every
    /// request of a run carries one.
    public var traceparent: String {
        Self.text { bytes in
            bytes.append(contentsOf: [0x30, 0x30, 0x2D])
            Self.put(high, &bytes)
            Self.put(low, &bytes)
            bytes.append(0x2D)
            Self.put(span, &bytes)
            bytes.append(contentsOf: [0x2D, 0x30, 0x31])
        }
    }

    private static func text(_ write: (inout [UInt8]) -> Void) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(55)
        write(&bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func put(_ value: UInt64, _ bytes: inout [UInt8]) {
        for shift in stride(from: 60, through: 0, by: -4) {
            let nibble = UInt8(truncatingIfNeeded: value >> UInt64(shift)) & 0x0F
            bytes.append(nibble < 10 ? 0x30 + nibble : 0x57 + nibble)
        }
    }
}

/// The trace identities of one run: the run id's hash is worked out once, not for every request
/// the run makes.
public struct TraceRoot: Sendable {
    public let run: String
    private let seed: UInt64

    public init(run: String) {
        self.run = run
        seed = stableHash(run, seed: 0x7472_6163_6570_6631)
    }

    /// The trace of the send with this id (``TraceIdentity/send(run:id:)``).
    public func send(_ id: Int) -> TraceIdentity {
        derive(domain: 1, a: UInt64(bitPattern: Int64(id)), b: 0)
    }

    /// The trace of a device's own request (login, register, a fetch): `request` numbers the
    /// requests, so that each has its own trace.
    public func device(_ device: Int, request: Int) -> TraceIdentity {
        var trace = derive(domain: 2, a: UInt64(bitPattern: Int64(device)), b: UInt64(bitPattern: Int64(request)))
        // The top bit of the low half set: a share under 50% (`Scenario.Tracing.samples`) never
        // picks a device's own trace, so what holds the sample's spans holds sends' alone.
        trace.low |= 1 << 63
        return trace
    }

    /// Nonzero ids (the W3C format has no all-zero trace or span id), spread by SplitMix's
    /// finalizer over the run's hash, the domain and the numbers.
    private func derive(domain: UInt64, a: UInt64, b: UInt64) -> TraceIdentity {
        var high = SplitMix64(seed: seed ^ (domain &* 0xD6E8_FEB8_6659_FD93) ^ a)
        let h = high.next()
        var low = SplitMix64(seed: h ^ (b &* 0x9E37_79B9_7F4A_7C15) ^ a)
        let l = low.next()
        let s = low.next()
        return TraceIdentity(high: h == 0 ? 1 : h, low: l, span: s == 0 ? 1 : s)
    }
}

/// A trace URL template's `{trace_id}` filled in (`http://jaeger:16686/trace/{trace_id}`).
public enum TraceURL {
    public static let placeholder = "{trace_id}"

    /// Nil unless the template names the placeholder and is an http(s) URL.
    public static func check(_ template: String) -> String? {
        guard template.contains(placeholder) else { return "must contain \(placeholder)" }
        guard template.hasPrefix("http://") || template.hasPrefix("https://") else { return "must be an http:// or https:// URL" }
        guard !template.contains(where: { $0.isWhitespace || $0 == "\"" || $0 == "<" || $0 == ">" }) else {
            return "must not contain spaces, quotes or angle brackets"
        }
        return nil
    }

    public static func link(_ template: String, traceID: String) -> String {
        template.replacingOccurrences(of: placeholder, with: traceID)
    }
}
