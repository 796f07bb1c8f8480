import Crypto
import Foundation
import PushFleetCore

/// Who may log in.
///
/// The seed's demo rule (a user is accepted when the password equals the name) is the default. A
/// users file replaces it: one `user:sha256:SALT:HEX` line per user, where HEX is the SHA-256 of
/// SALT followed by the password (`pushfleet hash-password` writes such lines). Blank lines and
/// lines starting with `#` are ignored.
public struct UserDirectory: Sendable {
    private enum Rule: Sendable {
        case demo
        case file([String: StoredPassword])
    }

    private struct StoredPassword: Sendable {
        var salt: String
        var digest: Data
    }

    public struct FileError: Error, CustomStringConvertible {
        public let line: Int
        public let message: String
        public var description: String { "users file line \(line): \(message)" }
    }

    private let rule: Rule

    /// The seed's demo rule: user == password.
    public static let demo = UserDirectory(rule: .demo)

    private init(rule: Rule) {
        self.rule = rule
    }

    /// Parses the contents of a users file.
    public init(fileContents: String) throws {
        var users: [String: StoredPassword] = [:]
        for (index, raw) in fileContents.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") { continue }
            let fields = line.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
            guard fields.count == 4, fields[1] == "sha256" else {
                throw FileError(line: index + 1, message: "expected user:sha256:SALT:HEX")
            }
            guard !fields[0].isEmpty else { throw FileError(line: index + 1, message: "empty user name") }
            guard let digest = Data(hex: fields[3]), digest.count == SHA256.byteCount else {
                throw FileError(line: index + 1, message: "HEX must be 64 hexadecimal digits")
            }
            users[fields[0]] = StoredPassword(salt: fields[2], digest: digest)
        }
        self.init(rule: .file(users))
    }

    /// True when the user exists and the password is theirs. Comparison is constant-time.
    public func verify(user: String, password: String) -> Bool {
        switch rule {
        case .demo:
            return !user.isEmpty && Self.constantTimeEqual(Data(user.utf8), Data(password.utf8))
        case .file(let users):
            guard let stored = users[user] else { return false }
            let digest = Data(SHA256.hash(data: Data((stored.salt + password).utf8)))
            return Self.constantTimeEqual(digest, stored.digest)
        }
    }

    /// A directory of the given users and passwords (stored salted and hashed, as from a file).
    public init(passwords: [(user: String, password: String)]) {
        var users: [String: StoredPassword] = [:]
        for (user, password) in passwords {
            let salt = Hex.lowercase((0..<8).map { _ in UInt8.random(in: 0...255) })
            users[user] = StoredPassword(salt: salt, digest: Data(SHA256.hash(data: Data((salt + password).utf8))))
        }
        self.init(rule: .file(users))
    }

    /// A users-file line for `user` with a fresh random salt.
    public static func line(user: String, password: String) -> String {
        let salt = Hex.lowercase((0..<16).map { _ in UInt8.random(in: 0...255) })
        let digest = Hex.lowercase(SHA256.hash(data: Data((salt + password).utf8)))
        return "\(user):sha256:\(salt):\(digest)"
    }

    private static func constantTimeEqual(_ a: Data, _ b: Data) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for (x, y) in zip(a, b) { difference |= x ^ y }
        return difference == 0
    }
}

extension Data {
    /// Hexadecimal digits, two per byte, read as bytes (a character outside 0-9, a-f, A-F, even
    /// a multi-byte one, makes it no hex at all).
    init?(hex: String) {
        guard let bytes = Hex.bytes(hex) else { return nil }
        self.init(bytes)
    }
}
