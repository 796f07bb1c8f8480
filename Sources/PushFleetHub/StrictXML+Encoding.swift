import Foundation

/// How an XML document's bytes become characters (XML 1.0 §4.3.3 and Appendix F): a byte
/// order mark, else the first bytes' pattern (UTF-16 and UTF-32 without a mark), else an
/// ASCII-compatible encoding named by the XML declaration (UTF-8 when it names none).
extension StrictXML {
    enum Encoding: Equatable {
        case utf8, latin1, ascii
        case utf16(bigEndian: Bool)
        case utf32(bigEndian: Bool)

        /// The names a declaration may give each encoding (compared without regard to case).
        func accepts(declared name: String) -> Bool {
            switch (self, name.lowercased()) {
            case (.utf8, "utf-8"), (.utf8, "utf8"): true
            case (.utf16, "utf-16"), (.utf16(bigEndian: true), "utf-16be"), (.utf16(bigEndian: false), "utf-16le"): true
            case (.utf32, "utf-32"), (.utf32(bigEndian: true), "utf-32be"), (.utf32(bigEndian: false), "utf-32le"): true
            default: false
            }
        }
    }

    /// The encoding the first bytes show, and how many of them are a byte order mark.
    static func sniff(_ bytes: [UInt8]) -> (encoding: Encoding?, bomLength: Int) {
        func starts(_ prefix: [UInt8]) -> Bool { bytes.count >= prefix.count && Array(bytes[..<prefix.count]) == prefix }
        if starts([0xEF, 0xBB, 0xBF]) { return (.utf8, 3) }
        if starts([0x00, 0x00, 0xFE, 0xFF]) { return (.utf32(bigEndian: true), 4) }
        if starts([0xFF, 0xFE, 0x00, 0x00]) { return (.utf32(bigEndian: false), 4) }
        if starts([0xFE, 0xFF]) { return (.utf16(bigEndian: true), 2) }
        if starts([0xFF, 0xFE]) { return (.utf16(bigEndian: false), 2) }
        // No mark: the zero bytes around the first character tell the width and order.
        if bytes.count >= 4, bytes[0] == 0, bytes[1] == 0, bytes[2] == 0, bytes[3] != 0 { return (.utf32(bigEndian: true), 0) }
        if bytes.count >= 4, bytes[0] != 0, bytes[1] == 0, bytes[2] == 0, bytes[3] == 0 { return (.utf32(bigEndian: false), 0) }
        if bytes.count >= 2, bytes[0] == 0, bytes[1] != 0 { return (.utf16(bigEndian: true), 0) }
        if bytes.count >= 2, bytes[0] != 0, bytes[1] == 0 { return (.utf16(bigEndian: false), 0) }
        // EBCDIC (`<?xm` is 4C 6F A7 94) and anything else that is not ASCII-compatible.
        if let first = bytes.first, first >= 0x80 || first == 0 { return (nil, 0) }
        return (.utf8, 0)
    }

    /// The document's characters, decoded strictly: a malformed sequence, an unpaired
    /// surrogate or an odd number of bytes is an error, never a replacement character.
    static func decode(_ data: some Collection<UInt8>) throws(Failure) -> [Unicode.Scalar] {
        let bytes = Array(data)
        let (sniffed, bom) = sniff(bytes)
        guard var encoding = sniffed else { throw Failure("the document's encoding is not supported (UTF-8 and UTF-16 are)") }
        let body = bytes[bom...]
        if encoding == .utf8, bom == 0 {
            // ASCII-compatible without a mark: the declaration names the encoding.
            switch declaredEncoding(body)?.lowercased() {
            case nil, "utf-8", "utf8": encoding = .utf8
            case "iso-8859-1", "latin1", "iso_8859-1": encoding = .latin1
            case "us-ascii", "ascii": encoding = .ascii
            case let other?: throw Failure("encoding '\(other.prefix(40))' does not match the document's bytes or is not supported")
            }
        }
        let scalars = try decode(body, as: encoding)
        if let declared = declaredEncoding(scalars), encoding != .latin1, encoding != .ascii, !encoding.accepts(declared: declared) {
            throw Failure("the declared encoding '\(declared.prefix(40))' does not match the document's bytes")
        }
        return scalars
    }

    private static func decode(_ bytes: ArraySlice<UInt8>, as encoding: Encoding) throws(Failure) -> [Unicode.Scalar] {
        var scalars: [Unicode.Scalar] = []
        scalars.reserveCapacity(bytes.count)
        switch encoding {
        case .latin1, .ascii:
            for byte in bytes {
                guard encoding == .latin1 || byte < 0x80 else { throw Failure("a byte over 0x7F in a US-ASCII document") }
                scalars.append(Unicode.Scalar(byte))
            }
        case .utf8:
            var decoder = UTF8()
            var iterator = bytes.makeIterator()
            try drain(&decoder, &iterator, into: &scalars, name: "UTF-8")
        case .utf16(let bigEndian):
            guard bytes.count % 2 == 0 else { throw Failure("an odd number of bytes in a UTF-16 document") }
            var units: [UInt16] = []
            units.reserveCapacity(bytes.count / 2)
            var index = bytes.startIndex
            while index < bytes.endIndex {
                let (a, b) = (UInt16(bytes[index]), UInt16(bytes[index + 1]))
                units.append(bigEndian ? a << 8 | b : b << 8 | a)
                index += 2
            }
            var decoder = UTF16()
            var iterator = units.makeIterator()
            try drain(&decoder, &iterator, into: &scalars, name: "UTF-16")
        case .utf32(let bigEndian):
            guard bytes.count % 4 == 0 else { throw Failure("the byte count of a UTF-32 document is not a multiple of 4") }
            var index = bytes.startIndex
            while index < bytes.endIndex {
                let word = bytes[index..<index + 4].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
                let value = bigEndian ? word : word.byteSwapped
                guard let scalar = Unicode.Scalar(value) else { throw Failure("not valid UTF-32") }
                scalars.append(scalar)
                index += 4
            }
        }
        return scalars
    }

    private static func drain<Codec: UnicodeCodec, Units: IteratorProtocol>(
        _ decoder: inout Codec, _ iterator: inout Units, into scalars: inout [Unicode.Scalar], name: String
    ) throws(Failure) where Units.Element == Codec.CodeUnit {
        while true {
            switch decoder.decode(&iterator) {
            case .scalarValue(let scalar): scalars.append(scalar)
            case .emptyInput: return
            case .error: throw Failure("not valid \(name)")
            }
        }
    }

    /// The `encoding` of an XML declaration at the very start, read from ASCII-compatible
    /// bytes or from decoded characters.
    static func declaredEncoding(_ bytes: ArraySlice<UInt8>) -> String? {
        declaredEncoding(bytes.prefix(200).map { Unicode.Scalar($0) })
    }

    static func declaredEncoding(_ scalars: [Unicode.Scalar]) -> String? {
        let head = String(String.UnicodeScalarView(scalars.prefix(200)))
        guard head.hasPrefix("<?xml"), let end = head.range(of: "?>") else { return nil }
        let declaration = head[..<end.lowerBound]
        guard let key = declaration.range(of: "encoding") else { return nil }
        var rest = declaration[key.upperBound...].drop { $0 == " " || $0 == "\t" || $0 == "\r" || $0 == "\n" }
        guard rest.first == "=" else { return nil }
        rest = rest.dropFirst().drop { $0 == " " || $0 == "\t" || $0 == "\r" || $0 == "\n" }
        guard let quote = rest.first, quote == "\"" || quote == "'" else { return nil }
        let value = rest.dropFirst().prefix { $0 != quote }
        return String(value)
    }
}
