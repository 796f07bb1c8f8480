/// The provider token one APNs connection is using, as a state machine with no clock of its own.
///
/// APNs binds a token to the connection it arrives on: a provider should use one token for about
/// an hour and refresh it at most every 20 minutes; a connection that switches to a token issued
/// less than 20 minutes after its current one is answered `TooManyProviderTokenUpdates` (429).
/// Measuring between the tokens' issue times, not between the moments the connection saw them,
/// lets a provider share one token among connections opened at any time. One connection carries
/// one team's tokens. A token seen before on the connection is checked only for its age.
struct APNsTokenSession: Equatable, Sendable {
    /// The shortest time between two token changes on one connection (seconds).
    static let minimumUpdateInterval: Int64 = 20 * 60

    private var current: APNsProviderToken?

    enum Step: Equatable, Sendable {
        /// The connection's current token, still young enough.
        case accepted(APNsProviderToken.Identity)
        case expired
        /// A token this connection has not adopted: inspect and verify it, then ``adopt(_:)``.
        case verify
    }

    enum Adoption: Equatable, Sendable {
        case adopted
        /// Too soon after the last change (429 `TooManyProviderTokenUpdates`).
        case tooManyUpdates
        /// Another team's token on this connection (403 `InvalidProviderToken`).
        case otherTeam
    }

    /// What to do with the token text a request presents.
    func step(for text: some StringProtocol, now: Int64) -> Step {
        guard let current, current.text == text else { return .verify }
        return APNsProviderToken.isExpired(current.identity, now: now) ? .expired : .accepted(current.identity)
    }

    /// Makes a verified token the connection's current one, if the rules allow it.
    mutating func adopt(_ token: APNsProviderToken) -> Adoption {
        if let current {
            // Streams of one connection verify a new token concurrently; each adopts it.
            if current.text == token.text { return .adopted }
            guard current.identity.teamID == token.identity.teamID else { return .otherTeam }
            guard token.identity.issuedAt - current.identity.issuedAt >= Self.minimumUpdateInterval else { return .tooManyUpdates }
        }
        current = token
        return .adopted
    }
}
