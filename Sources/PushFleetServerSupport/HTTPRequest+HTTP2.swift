import HTTPTypes
import NIOHPACK

extension HTTPRequest {
    /// A request head from an HTTP/2 header block; nil for a block the stream channels should
    /// judge (an unknown or repeated pseudo-header, no method, a field name HTTP does not allow).
    init?(http2 block: HPACKHeaders) {
        var method: String?
        var scheme: String?
        var authority: String?
        var path: String?
        var index = block.startIndex
        while index != block.endIndex {
            let (name, value, _) = block[index]
            guard name.utf8.first == UInt8(ascii: ":") else { break }
            switch name {
            case ":method" where method == nil: method = value
            case ":scheme" where scheme == nil: scheme = value
            case ":authority" where authority == nil: authority = value
            case ":path" where path == nil: path = value
            default: return nil
            }
            index = block.index(after: index)
        }
        guard let method, let parsed = HTTPRequest.Method(method) else { return nil }
        self.init(method: parsed, scheme: scheme, authority: authority, path: path)
        headerFields.reserveCapacity(block.count)
        while index != block.endIndex {
            let (name, value, _) = block[index]
            guard let fieldName = HTTPField.Name(name), name.utf8.first != UInt8(ascii: ":") else { return nil }
            headerFields.append(HTTPField(name: fieldName, value: value))
            index = block.index(after: index)
        }
    }
}
