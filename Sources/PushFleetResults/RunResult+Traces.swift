import PushFleetCore

extension RunResult {
    /// The trace id of an incident's send, when the run's requests carried trace context.
    public func traceID(of incident: Incident) -> String? {
        guard info.traceContext == true, let run = info.runID, let send = incident.send else { return nil }
        return TraceIdentity.send(run: run, id: send).traceID
    }
}

/// A delivered pair a run keeps for its trace: when its send started and was answered, when the
/// push arrived, and each hop's time where the push service said where it went.
public struct SampledDelivery: Sendable, Codable, Equatable {
    public var send: Int
    public var device: Int
    public var platform: String?
    /// Seconds from the run's start.
    public var sendStartSecond: Double
    public var sendEndSecond: Double
    public var receivedSecond: Double
    /// Nanoseconds per hop: send start → the push service (or hub) has it, the hub, the push
    /// service (accepted → written), the device (written → read), the fetch.
    public var backendNs: Int64?
    public var hubNs: Int64?
    public var pushServiceNs: Int64?
    public var deviceNs: Int64?
    public var fetchNs: Int64?
    /// The span id (16 hex digits) of the provider request that handed the push over, when it
    /// carried the send's trace: the push service's part of the push is its child.
    public var pushSpan: String?
    /// The provider request carried no trace context, or another trace's: the push service's
    /// part is linked to the send, never given a guessed parent.
    public var pushUntraced: Bool?

    public init(
        send: Int, device: Int, platform: String?, sendStartSecond: Double, sendEndSecond: Double, receivedSecond: Double, backendNs: Int64? = nil,
        hubNs: Int64? = nil, pushServiceNs: Int64? = nil, deviceNs: Int64? = nil, fetchNs: Int64? = nil, pushSpan: String? = nil,
        pushUntraced: Bool? = nil
    ) {
        self.send = send
        self.device = device
        self.platform = platform
        self.sendStartSecond = sendStartSecond
        self.sendEndSecond = sendEndSecond
        self.receivedSecond = receivedSecond
        self.backendNs = backendNs
        self.hubNs = hubNs
        self.pushServiceNs = pushServiceNs
        self.deviceNs = deviceNs
        self.fetchNs = fetchNs
        self.pushSpan = pushSpan
        self.pushUntraced = pushUntraced
    }
}
