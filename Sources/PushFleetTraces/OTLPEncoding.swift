public import PushFleetCore

/// An OTLP `ExportTraceServiceRequest` in protobuf's wire format (opentelemetry-proto's
/// `collector/trace/v1`, `trace/v1`, `common/v1`, `resource/v1`; field numbers as there).
///
/// Written by hand rather than with swift-otel: its public API since 1.0 is a tracer that draws
/// every span id at random and exports spans as they end, and its exporter and finished-span
/// types are internal, so it cannot export a span under the id a run's request carried, nor hold
/// spans until the ledger has judged their push (docs/tracing.md). Generated swift-protobuf types
/// would need the protoc plugin built on every clean clone; the handful of messages here are
/// plain length-delimited fields, and CI decodes them with the official Python package.
public enum OTLPEncoding {
    public static func exportRequest(_ services: [ServiceSpans], scope: (name: String, version: String)) -> [UInt8] {
        var out = ProtoWriter()
        for service in services where !service.spans.isEmpty {
            out.message(1) { resourceSpans in
                resourceSpans.message(1) { resource in
                    resource.message(1) { $0.keyValue("service.name", .string(service.service)) }
                }
                resourceSpans.message(2) { scopeSpans in
                    scopeSpans.message(1) { instrumentation in
                        instrumentation.string(1, scope.name)
                        instrumentation.string(2, scope.version)
                    }
                    for span in service.spans { scopeSpans.message(2) { $0.span(span) } }
                }
            }
        }
        return out.bytes
    }
}

/// Protobuf's wire format: varints, fixed64, and length-delimited fields (written into a
/// scratch writer, then prefixed with their length).
struct ProtoWriter {
    var bytes: [UInt8] = []

    mutating func varint(_ value: UInt64) {
        var value = value
        while value >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        bytes.append(UInt8(value))
    }

    mutating func tag(_ field: UInt64, _ wireType: UInt64) {
        varint(field << 3 | wireType)
    }

    mutating func varintField(_ field: UInt64, _ value: UInt64) {
        tag(field, 0)
        varint(value)
    }

    mutating func fixed64(_ field: UInt64, _ value: UInt64) {
        tag(field, 1)
        for shift in stride(from: 0, to: 64, by: 8) { bytes.append(UInt8(truncatingIfNeeded: value >> UInt64(shift))) }
    }

    mutating func lengthDelimited(_ field: UInt64, _ payload: [UInt8]) {
        tag(field, 2)
        varint(UInt64(payload.count))
        bytes += payload
    }

    mutating func string(_ field: UInt64, _ text: String) {
        lengthDelimited(field, Array(text.utf8))
    }

    mutating func message(_ field: UInt64, _ write: (inout ProtoWriter) -> Void) {
        var inner = ProtoWriter()
        write(&inner)
        lengthDelimited(field, inner.bytes)
    }

    /// 16 bytes, big-endian, as the hex text of ``TraceIdentity/traceID`` reads.
    static func traceID(_ identity: TraceIdentity) -> [UInt8] {
        spanID(identity.high) + spanID(identity.low)
    }

    static func spanID(_ value: UInt64) -> [UInt8] {
        stride(from: 56, through: 0, by: -8).map { UInt8(truncatingIfNeeded: value >> UInt64($0)) }
    }

    /// A `KeyValue` (field 1 key, field 2 `AnyValue`) as the body of the current message.
    mutating func keyValue(_ key: String, _ value: TraceSpan.Value) {
        string(1, key)
        message(2) { any in
            switch value {
            case .string(let text): any.string(1, text)
            case .bool(let flag): any.varintField(2, flag ? 1 : 0)
            case .int(let number): any.varintField(3, UInt64(bitPattern: number))
            case .double(let number): any.fixed64(4, number.bitPattern)
            }
        }
    }

    mutating func span(_ span: TraceSpan) {
        lengthDelimited(1, Self.traceID(span.identity))
        lengthDelimited(2, Self.spanID(span.identity.span))
        if let parent = span.parent { lengthDelimited(4, Self.spanID(parent)) }
        string(5, span.name)
        varintField(6, span.kind.rawValue)
        fixed64(7, span.start)
        fixed64(8, span.end)
        for (key, value) in span.attributes { message(9) { $0.keyValue(key, value) } }
        for link in span.links {
            message(13) { out in
                out.lengthDelimited(1, Self.traceID(link.target))
                out.lengthDelimited(2, Self.spanID(link.target.span))
                for (key, value) in link.attributes { out.message(4) { $0.keyValue(key, value) } }
            }
        }
        switch span.status {
        case .unset: break
        case .ok: message(15) { $0.varintField(3, 1) }
        case .error(let message):
            self.message(15) { status in
                status.string(2, message)
                status.varintField(3, 2)
            }
        }
    }
}
