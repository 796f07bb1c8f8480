/// Latency a backend that pushfleet started adds to its own answers, for fault scenarios:
/// `send` delays the sends (`POST`s under `/api/notifications`), `fetch` the fetches (`GET`s).
public struct BackendLatency: Sendable, Equatable {
    public var send: LatencyDistribution?
    public var fetch: LatencyDistribution?
    /// Sends per second the backend takes at most, through a queue of `sendQueue`; beyond the
    /// queue a send is answered 503. Nil: no limit but the machine's.
    public var sendRate: Double?
    /// Sends that may wait for the send rate; nil for a quarter second's worth.
    public var sendQueue: Int?

    public init(send: LatencyDistribution? = nil, fetch: LatencyDistribution? = nil, sendRate: Double? = nil, sendQueue: Int? = nil) {
        self.send = send
        self.fetch = fetch
        self.sendRate = sendRate
        self.sendQueue = sendQueue
    }

    /// Problems with the settings (each latency within 0…1h, a rate and queue in range), empty
    /// when usable.
    public var problems: [String] {
        var problems = (send?.problems() ?? []) + (fetch?.problems() ?? [])
        if let sendRate, !ServiceQueue.rateRange.contains(sendRate) { problems.append("the send rate must be between 0.001/s and 10000000/s, got \(sendRate)") }
        if let sendQueue, !ServiceQueue.capacityRange.contains(sendQueue) { problems.append("the send queue must be between 1 and 10000000, got \(sendQueue)") }
        return problems
    }
}

/// Reads and replaces the latency of a backend that pushfleet started; the engine holds one only
/// for such a backend.
public protocol BackendLatencyControl: Sendable {
    var latency: BackendLatency { get }
    func replace(with latency: BackendLatency)
}
