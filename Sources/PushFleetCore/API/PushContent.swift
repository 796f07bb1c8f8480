import Foundation

/// A send's nonce as a push or a payload carries it: `pf:<run id>:<send>`.
public enum Nonce: Equatable, Sendable {
    /// A send of this run.
    case this(Int)
    /// A send of another run (another run id, or the format of a build without run ids).
    case otherRun
}

/// What a received push says, read through the description's ``PushLayout``.
public enum PushContent: Equatable, Sendable {
    /// An alert; the nonce of the send it names, if any.
    case plain(nonce: Nonce?)
    /// A secure push: only the id of the stored notification.
    case secure(id: String)
    /// A rich push: the stored content's id and the nonce its message carries.
    case rich(id: String, nonce: Nonce?)

    /// The marker every message of a run carries.
    public static func nonceText(_ send: Int, run: String) -> String { "pf:\(run):\(send)" }

    /// The nonce in a text, from its last `pf:` marker.
    public static func nonce(in text: some StringProtocol, run: String) -> Nonce? {
        guard let range = text.range(of: "pf:", options: .backwards) else { return nil }
        let rest = text[range.upperBound...]
        let head = rest.prefix { $0.isHexDigit }
        // `pf:<digits>` without a run id is the marker of a build before run ids: another run.
        let legacy: Nonce? = !head.isEmpty && head.allSatisfy(\.isNumber) ? .otherRun : nil
        let after = rest.dropFirst(head.count)
        guard !head.isEmpty, after.first == ":", let send = Int(after.dropFirst().prefix { $0.isNumber }) else { return legacy }
        return head == run ? .this(send) : .otherRun
    }

    /// The secure payload of a send: run, nonce and recipient, so a fetch proves whose it was.
    public static func securePayload(send: Int, recipient: String, run: String) -> String { "pf:\(run):\(send):\(recipient)" }

    /// Parses a secure payload into its nonce and recipient.
    public static func parseSecurePayload(_ text: String, run: String) -> (nonce: Nonce, recipient: String)? {
        let parts = text.split(separator: ":", maxSplits: 3, omittingEmptySubsequences: false)
        guard parts.count == 4, parts[0] == "pf", let nonce = Int(parts[2]) else { return nil }
        return (parts[1] == run ? .this(nonce) : .otherRun, String(parts[3]))
    }

    /// Reads a push body (the provider's request body, as the backend sent it).
    public init(body: [UInt8], pushType: String, layout: PushLayout, run: String) {
        func first(_ locations: [PushLocation]) -> String? {
            for place in locations where place.pushType == nil || place.pushType == pushType {
                if let value = ValueReader.read(place.location, headers: [], body: body) { return value.string }
            }
            return nil
        }
        func nonce() -> Nonce? {
            if layout.nonce.isEmpty { return Self.nonce(in: String(decoding: body, as: UTF8.self), run: run) }
            return first(layout.nonce).flatMap { Self.nonce(in: $0, run: run) }
        }
        if let id = first(layout.richID) {
            self = .rich(id: id, nonce: first(layout.richMessage).flatMap { Self.nonce(in: $0, run: run) })
        } else if let id = first(layout.secureID) {
            self = .secure(id: id)
        } else {
            self = .plain(nonce: nonce())
        }
    }
}
