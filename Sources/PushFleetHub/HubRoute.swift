/// A request's place in the Notification Hubs REST API, from its method and the path after
/// `/{hub}`. Collection names are matched without regard to case (the documentation writes
/// `registrationIDs`, the SDKs `registrationids`).
enum HubRoute: Equatable {
    case createRegistrationID
    case createRegistration
    case queryRegistrations
    case readRegistration(String)
    case putRegistration(String)
    case deleteRegistration(String)
    case tagRegistrations(String)
    case readInstallation(String)
    case putInstallation(String)
    case patchInstallation(String)
    case deleteInstallation(String)
    case send
    /// A path the hub has; the method is not allowed on it.
    case methodNotAllowed
    case notFound

    /// - Parameters:
    ///   - method: the HTTP method, upper case.
    ///   - segments: the path's segments after the hub's name, percent-decoded.
    static func resolve(method: String, segments: [String]) -> HubRoute {
        let collection = segments.first?.lowercased()
        switch (collection, segments.count) {
        case ("registrationids", 1):
            return method == "POST" ? .createRegistrationID : .methodNotAllowed
        case ("registrations", 1):
            switch method {
            case "POST": return .createRegistration
            case "GET": return .queryRegistrations
            default: return .methodNotAllowed
            }
        case ("registrations", 2):
            switch method {
            case "GET": return .readRegistration(segments[1])
            case "PUT": return .putRegistration(segments[1])
            case "DELETE": return .deleteRegistration(segments[1])
            default: return .methodNotAllowed
            }
        case ("tags", 3) where segments[2].lowercased() == "registrations":
            return method == "GET" ? .tagRegistrations(segments[1]) : .methodNotAllowed
        case ("installations", 2):
            switch method {
            case "GET": return .readInstallation(segments[1])
            case "PUT": return .putInstallation(segments[1])
            case "PATCH": return .patchInstallation(segments[1])
            case "DELETE": return .deleteInstallation(segments[1])
            default: return .methodNotAllowed
            }
        case ("messages", 1):
            return method == "POST" ? .send : .methodNotAllowed
        default:
            return .notFound
        }
    }

    /// The right a token needs: sends need Send, listing every registration or a tag's needs
    /// Manage, and a device's own registration and installation calls need Listen.
    var requiredRight: SharedAccessSignature.Right {
        switch self {
        case .send: .send
        case .queryRegistrations, .tagRegistrations: .manage
        default: .listen
        }
    }
}
