/// One span as OTLP carries it: ids, times in nanoseconds since the Unix epoch, attributes,
/// status and links. Built by pushfleet from what a run recorded, so every id is the one its
/// requests carried (``TraceIdentity``), never one a tracer drew at random.
public struct TraceSpan: Sendable, Equatable {
    /// OTLP's `SpanKind`.
    public enum Kind: UInt64, Sendable {
        case `internal` = 1
        case server = 2
        case client = 3
        case producer = 4
        case consumer = 5
    }

    public enum Status: Sendable, Equatable {
        case unset
        case ok
        case error(String)
    }

    public enum Value: Sendable, Equatable {
        case string(String)
        case int(Int64)
        case bool(Bool)
        case double(Double)
    }

    /// A span of another trace (or of this one) this span relates to, without being its child.
    public struct Link: Sendable, Equatable {
        /// The linked span: its trace, and its id in ``TraceIdentity/span``.
        public var target: TraceIdentity
        public var attributes: [(String, Value)]

        public init(target: TraceIdentity, attributes: [(String, Value)] = []) {
            self.target = target
            self.attributes = attributes
        }

        public static func == (a: Link, b: Link) -> Bool {
            a.target == b.target && a.attributes.elementsEqual(b.attributes) { $0.0 == $1.0 && $0.1 == $1.1 }
        }
    }

    /// The span's trace, and its own id in ``TraceIdentity/span``.
    public var identity: TraceIdentity
    public var parent: UInt64?
    public var name: String
    public var kind: Kind
    public var start: UInt64
    public var end: UInt64
    public var attributes: [(String, Value)]
    public var status: Status
    public var links: [Link]

    public init(
        identity: TraceIdentity, parent: UInt64?, name: String, kind: Kind, start: UInt64, end: UInt64, attributes: [(String, Value)] = [],
        status: Status = .unset, links: [Link] = []
    ) {
        self.identity = identity
        self.parent = parent
        self.name = name
        self.kind = kind
        self.start = start
        self.end = max(start, end)
        self.attributes = attributes
        self.status = status
        self.links = links
    }

    public static func == (a: TraceSpan, b: TraceSpan) -> Bool {
        a.identity == b.identity && a.parent == b.parent && a.name == b.name && a.kind == b.kind && a.start == b.start && a.end == b.end
            && a.attributes.elementsEqual(b.attributes) { $0.0 == $1.0 && $0.1 == $1.1 } && a.status == b.status && a.links == b.links
    }
}

/// The spans of one service (`service.name`), as one OTLP `ResourceSpans` carries them.
public struct ServiceSpans: Sendable {
    public var service: String
    public var spans: [TraceSpan]

    public init(service: String, spans: [TraceSpan]) {
        self.service = service
        self.spans = spans
    }
}
