import HTTPTypes

/// The APNs request headers the endpoint judges, read in one pass over the fields: a look-up by
/// name scans every field (and joins repeats), and a push needs eight.
struct APNsHeaders {
    var id: String?
    var topic: String?
    var pushType: String?
    var priority: String?
    var expiration: String?
    var collapseID: String?
    var authorization: String?
    /// One of these came more than once: Apple answers `DuplicateHeaders`. Their values are then
    /// joined with ", ", as a look-up by name gives them.
    private(set) var duplicated = false

    init(_ fields: HTTPFields) {
        for field in fields {
            // Every name read here starts with "a"; most others do not.
            guard field.name.canonicalName.utf8.first == UInt8(ascii: "a") else { continue }
            switch field.name {
            case .apnsID: Self.keep(field.value, in: &id, &duplicated)
            case .apnsTopic: Self.keep(field.value, in: &topic, &duplicated)
            case .apnsPushType: Self.keep(field.value, in: &pushType, &duplicated)
            case .apnsPriority: Self.keep(field.value, in: &priority, &duplicated)
            case .apnsExpiration: Self.keep(field.value, in: &expiration, &duplicated)
            case .apnsCollapseID: Self.keep(field.value, in: &collapseID, &duplicated)
            case .authorization: Self.keep(field.value, in: &authorization, &duplicated)
            default: continue
            }
        }
    }

    private static func keep(_ value: String, in slot: inout String?, _ duplicated: inout Bool) {
        guard let first = slot else {
            slot = value
            return
        }
        slot = first + ", " + value
        duplicated = true
    }
}
