import Foundation

/// Where a reference backend keeps its registrations and notifications: `memory`,
/// `sqlite:PATH` or a `postgres://` / `postgresql://` URL.
public enum StoreLocation: Sendable, Equatable, CustomStringConvertible {
    case memory
    case sqlite(path: String)
    case postgres(url: String)

    /// The store a text names, or why it names none.
    public static func parse(_ text: String) -> Result<StoreLocation, StoreLocationError> {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        if trimmed == "memory" { return .success(.memory) }
        if trimmed.hasPrefix("sqlite:") {
            let path = String(trimmed.dropFirst("sqlite:".count))
            guard !path.isEmpty else { return .failure(.init(message: "sqlite: needs a file path, e.g. sqlite:pushfleet.db")) }
            guard !path.contains("\0") else { return .failure(.init(message: "the sqlite path contains a NUL byte")) }
            return .success(.sqlite(path: path))
        }
        if trimmed.hasPrefix("postgres://") || trimmed.hasPrefix("postgresql://") {
            guard trimmed.count > "postgres://".count + 1 else { return .failure(.init(message: "the postgres URL names no host")) }
            return .success(.postgres(url: trimmed))
        }
        return .failure(.init(message: "'\(text)' is not a store; use memory, sqlite:PATH or postgres://USER:PASSWORD@HOST:PORT/DATABASE"))
    }

    public var isPersistent: Bool { self != .memory }

    /// Safe to print: a postgres URL's password is masked.
    public var description: String {
        switch self {
        case .memory: return "memory"
        case .sqlite(let path): return "sqlite:\(path)"
        case .postgres(let url):
            guard let at = url.firstIndex(of: "@"), let scheme = url.range(of: "://"),
                let colon = url[scheme.upperBound..<at].firstIndex(of: ":")
            else { return url }
            return String(url[..<url.index(after: colon)]) + "***" + String(url[at...])
        }
    }
}

public struct StoreLocationError: Error, Equatable, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}
