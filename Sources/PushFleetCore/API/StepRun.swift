/// Runs one step's requests in order under its status rules: which request comes next, when to
/// log in again, when to start over, when the step is done or failed.
///
/// Pure: the caller renders and makes each request and reports the answer; nothing here reads a
/// clock or a socket. Values the answers give go into the step's local slots and the device's
/// slots it is handed; the user's (a login token) are the caller's to keep.
public struct StepRun: Sendable {
    public enum Action: Sendable, Equatable {
        /// Make request `index` of the step.
        case perform(Int)
        /// Log the user in, then report ``loggedIn(_:device:)``.
        case login
        case done(Outcome)
        case failed(Failure)
    }

    public struct Outcome: Sendable, Equatable {
        /// The status of the rule that made the step start over or forget a value (a 410 that
        /// dropped the registration id): the backend had lost something. Nil when nothing did.
        public var recoveredFrom: Int?

        public init(recoveredFrom: Int? = nil) {
            self.recoveredFrom = recoveredFrom
        }
    }

    public struct Failure: Sendable, Equatable {
        public enum Reason: Sendable, Equatable {
            /// An unexpected status no rule (or no rule with turns left) handled.
            case status(Int)
            /// No answer: a bounded transport label (`timeout`, `connect` …).
            case transport(String)
            /// An expected answer without a value the step needs.
            case missingValue(String)
            /// A request that could not be rendered (a variable without a value).
            case render(String)
            case login
        }

        public var request: Int
        public var reason: Reason

        public init(request: Int, reason: Reason) {
            self.request = request
            self.reason = reason
        }
    }

    public let step: APIStep
    /// The request in flight (or the one a login is for).
    public private(set) var current = 0
    /// Values extracted into this step's local slots (a send's content id, a probe's own
    /// registration id).
    public private(set) var locals: [APIValue?]
    private var recoveredFrom: Int?
    /// Turns each rule has had in this run of the step: `request << 8 | rule`.
    private var fired: [(key: Int, count: Int)] = []

    public init(step: APIStep, localSlots: Int = 0) {
        self.step = step
        self.locals = Array(repeating: nil, count: localSlots)
    }

    /// The first request to make: requests whose values are all known are skipped.
    public mutating func start(device: [APIValue?]) -> Action {
        advance(from: 0, device: device)
    }

    /// An answer to the current request, with the values read from it.
    public mutating func answered(status: Int, extracted: ExtractedValues, device: inout [APIValue?]) -> Action {
        let request = step.requests[current]
        if request.expect.contains(status) {
            if let missing = extracted.missing { return .failed(Failure(request: current, reason: .missingValue(missing))) }
            for (ref, value) in extracted.values { store(value, at: ref, device: &device) }
            return advance(from: current + 1, device: device)
        }
        guard let (index, rule) = request.rule(for: status) else {
            return .failed(Failure(request: current, reason: .status(status)))
        }
        let key = current << 8 | index
        let turns = fired.first { $0.key == key }?.count ?? 0
        guard turns < rule.times else { return .failed(Failure(request: current, reason: .status(status))) }
        if let slot = fired.firstIndex(where: { $0.key == key }) { fired[slot].count += 1 } else { fired.append((key, 1)) }
        for ref in rule.forget { store(nil, at: ref, device: &device) }
        if !rule.forget.isEmpty || rule.then == .restart { recoveredFrom = status }
        switch rule.then {
        case .retry: return .perform(current)
        case .restart: return advance(from: 0, device: device)
        case .login: return .login
        case .fail: return .failed(Failure(request: current, reason: .status(status)))
        }
    }

    /// Whether this status of the current request is accepted or handled by a rule with turns
    /// left: anything else fails the step.
    public func handles(status: Int) -> Bool {
        let request = step.requests[current]
        if request.expect.contains(status) { return true }
        guard let (index, rule) = request.rule(for: status), rule.then != .fail else { return false }
        return (fired.first { $0.key == current << 8 | index }?.count ?? 0) < rule.times
    }

    /// The current request got no answer, or could not be made.
    public func failed(_ reason: Failure.Reason) -> Action {
        .failed(Failure(request: current, reason: reason))
    }

    /// The login a rule asked for is over: repeat the request, or fail.
    public func loggedIn(_ succeeded: Bool) -> Action {
        succeeded ? .perform(current) : .failed(Failure(request: current, reason: .login))
    }

    private mutating func advance(from index: Int, device: [APIValue?]) -> Action {
        var next = index
        while next < step.requests.count, isSkipped(step.requests[next], device: device) { next += 1 }
        guard next < step.requests.count else { return .done(Outcome(recoveredFrom: recoveredFrom)) }
        current = next
        return .perform(next)
    }

    private func isSkipped(_ request: APIRequest, device: [APIValue?]) -> Bool {
        !request.skipWhenKnown.isEmpty && request.skipWhenKnown.allSatisfy { value(of: $0, device: device) != nil }
    }

    public func value(of ref: VariableRef, device: [APIValue?]) -> APIValue? {
        switch ref {
        case .stored(.device, let slot): slot < device.count ? device[slot] : nil
        case .stored(.local, let slot): slot < locals.count ? locals[slot] : nil
        default: nil
        }
    }

    private mutating func store(_ value: APIValue?, at ref: VariableRef, device: inout [APIValue?]) {
        switch ref {
        case .stored(.device, let slot) where slot < device.count: device[slot] = value
        case .stored(.local, let slot) where slot < locals.count: locals[slot] = value
        default: break
        }
    }
}
