/// Latency a backend that pushfleet started adds to its own answers, for fault scenarios:
/// `send` delays the sends (`POST`s under `/api/notifications`), `fetch` the fetches (`GET`s).
public struct BackendLatency: Sendable, Equatable {
    public var send: LatencyDistribution?
    public var fetch: LatencyDistribution?

    public init(send: LatencyDistribution? = nil, fetch: LatencyDistribution? = nil) {
        self.send = send
        self.fetch = fetch
    }

    /// Problems with the settings (each latency within 0…1h), empty when usable.
    public var problems: [String] { (send?.problems() ?? []) + (fetch?.problems() ?? []) }
}

/// Reads and replaces the latency of a backend that pushfleet started; the engine holds one only
/// for such a backend.
public protocol BackendLatencyControl: Sendable {
    var latency: BackendLatency { get }
    func replace(with latency: BackendLatency)
}
