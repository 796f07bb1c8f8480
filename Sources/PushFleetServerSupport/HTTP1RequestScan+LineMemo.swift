import HTTPTypes

extension HTTP1RequestScan {
    /// The field lines of a connection's previous head, each with what it made. Clients send
    /// most lines of a provider request unchanged from one request to the next (the provider
    /// token, the topic, the content type, the host), and a line read again byte for byte makes
    /// the same: its checks, its strings and its field are not made anew. A line is remembered
    /// with its CRLF, and a valid line has no other CR, so a match ends where the line did.
    public struct LineMemo {
        enum Effect {
            case host(String)
            case contentLength(Int, HTTPField)
            case connection(closes: Bool, HTTPField)
            case field(HTTPField)
        }

        struct Line {
            var bytes: [UInt8]
            var effect: Effect
            /// Times a head's line here differed from the one kept (saturating, see below).
            var changes: UInt8 = 0

            /// A line that changes on every head (a request id, a `traceparent`, a caller's token
            /// on a shared connection) is not kept as bytes: it would never match, and copying it
            /// out cost an allocation a request. One in 64 changes keeps it again, so a line that
            /// settles is matched once more.
            var isVolatile: Bool { changes >= Line.volatileAfter && changes % 64 != 0 }
            static let volatileAfter: UInt8 = 4
        }

        /// Lines past these are read every time.
        static let maxLines = 32
        static let maxLineLength = 2048

        private(set) var lines: [Line] = []
        /// The fields of the last head read whole, made of the first `settledLines` lines.
        private var settled = HTTPFields()
        /// -1 once one of those lines was replaced.
        private var settledLines = -1

        public init() {}

        /// The bytes of the lines kept.
        public var keptBytes: Int {
            lines.reduce(0) { $0 + $1.bytes.count }
        }

        /// The fields of the first `count` lines, each the memo's.
        func fields(ofFirst count: Int) -> HTTPFields {
            if count == settledLines { return settled }
            var fields = HTTPFields()
            fields.reserveCapacity(max(count, 16))
            for line in lines[0..<count] {
                switch line.effect {
                case .host: continue
                case .contentLength(_, let field), .connection(_, let field), .field(let field): fields.append(field)
                }
            }
            return fields
        }

        /// A head was read whole, of `count` lines, making `fields`.
        mutating func settle(_ fields: HTTPFields, lines count: Int) {
            guard count <= lines.count else { return settledLines = -1 }
            // What is kept is one head's lines, so never more than ``HTTP1RequestScan/maxHeadLength``.
            if lines.count > count { lines.removeSubrange(count...) }
            settled = fields
            settledLines = count
        }

        mutating func remember(_ effect: Effect, line: UnsafeRawBufferPointer, at index: Int) {
            if index < settledLines { settledLines = -1 }
            guard index < Self.maxLines, line.count <= Self.maxLineLength, index <= lines.count else {
                // The line it replaces, and every line after it, must not match a later head.
                if index < lines.count { lines.removeSubrange(index...) }
                return
            }
            if index == lines.count {
                lines.append(Line(bytes: Array(line), effect: effect))
                return
            }
            let changes = lines[index].changes == .max ? Line.volatileAfter : lines[index].changes + 1
            var entry = Line(bytes: [], effect: effect, changes: changes)
            if !entry.isVolatile { entry.bytes = Array(line) }
            lines[index] = entry
        }
    }
}
