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
            let entry = Line(bytes: Array(line), effect: effect)
            if index == lines.count {
                lines.append(entry)
            } else {
                lines[index] = entry
            }
        }
    }
}
