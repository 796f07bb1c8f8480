public import PushFleetCore

extension Nonce {
    public var attribution: DeliveryLedger.Attribution {
        switch self {
        case .this(let send): .send(send)
        case .otherRun: .otherRun
        }
    }
}

extension PushContent {
    /// What the push names before any fetch.
    public var attribution: DeliveryLedger.Attribution {
        switch self {
        case .plain(let nonce): nonce?.attribution ?? .unattributable
        case .secure(let id): .content(id)
        case .rich(let id, let nonce): nonce?.attribution ?? .content(id)
        }
    }
}
