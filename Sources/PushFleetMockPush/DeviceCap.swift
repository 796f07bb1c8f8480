/// The device share of one gateway port's connections: how many device WebSockets it holds at
/// once. The port's connection cap counts every connection; devices may take at most this many
/// of them, so provider, hub and admin connections always find a free place instead of waiting in
/// the listen backlog behind device sockets. A device past the cap is refused at once (503).
///
/// An *episode* is a stretch at the cap: it starts with the first refusal and ends once the
/// devices held fall to ``resumeAt`` (a twentieth below the cap), so a fleet hovering at the cap
/// is logged once, not at every socket that comes and goes.
struct DeviceCap: Sendable, Equatable {
    /// Device WebSockets held at most.
    let cap: Int
    /// Held devices at or below which an episode ends.
    let resumeAt: Int
    /// Device WebSockets held now.
    private(set) var held = 0
    /// Upgrades refused since start.
    private(set) var refused = 0
    /// Times the cap was reached since start.
    private(set) var episodes = 0
    /// Refusals of the episode under way; nil outside one.
    private(set) var refusedInEpisode: Int?

    enum Admission: Equatable {
        case admit
        /// Refuse the upgrade; `startsEpisode` when this is the first refusal since the cap was
        /// reached (the one to log).
        case refuse(startsEpisode: Bool)
    }

    enum Release: Equatable {
        case none
        /// The episode is over: log how many it refused.
        case episodeEnded(refused: Int)
    }

    init(cap: Int) {
        self.cap = max(0, cap)
        self.resumeAt = max(0, self.cap - max(1, self.cap / 20))
    }

    /// A device asks for a WebSocket.
    mutating func admit() -> Admission {
        if held < cap {
            held += 1
            return .admit
        }
        refused += 1
        if let count = refusedInEpisode {
            refusedInEpisode = count + 1
            return .refuse(startsEpisode: false)
        }
        refusedInEpisode = 1
        episodes += 1
        return .refuse(startsEpisode: true)
    }

    /// An admitted device's connection closed.
    mutating func release() -> Release {
        guard held > 0 else { return .none }
        held -= 1
        guard let count = refusedInEpisode, held <= resumeAt else { return .none }
        refusedInEpisode = nil
        return .episodeEnded(refused: count)
    }

    /// The device cap a port with `total` connections gets by default: the total less a reserve
    /// for providers, hubs and admin — a tenth of it, at least 128 (the reference backend keeps 64
    /// connections to the push service) but never more than half, and at most 1,024.
    static func defaultCap(total: Int) -> Int {
        let reserve = min(max(total / 10, min(128, total / 2)), 1024)
        return max(1, total - reserve)
    }
}
