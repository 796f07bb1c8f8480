/// A backend's HTTP API as a scenario describes it (`api:`): the requests each device and sender
/// makes, what they keep from the answers, how they react to statuses, and where a push carries
/// what the ledger needs. The seed's AppBackend is one such description (the `appbackend`
/// preset); there is no other code path.
///
/// Every template in it is compiled when the scenario is loaded: variables are resolved to where
/// their values live, so a request is rendered without parsing anything.
public struct APIDescription: Sendable, Equatable {
    /// `appbackend` for the preset, `custom` for a description written in the scenario.
    public var name: String
    /// Logs a user in (once per device, and again when a rule says so); its extractions are the
    /// user's (a token). Nil: nothing to log in to, credentials go in every request's headers.
    public var login: APIStep?
    /// Registers a device; its last request's answer is the confirmation that makes the device an
    /// expected recipient. Its extractions are the device's.
    public var register: APIStep
    public var unregister: APIStep?
    /// A leak probe's attempt to register for another user (`{{victim}}`): any success is a leak.
    public var probe: APIStep?
    public var send: [Scenario.Traffic.Kind: APIStep]
    /// Fetches the content a secure or rich push names (`{{id}}`).
    public var fetch: [Scenario.Traffic.Kind: APIStep]
    public var receive: ReceiveDescription
    /// How the backend names each platform (`{{device.platform}}`, `{{platform}}`).
    public var platformNames: [Scenario.PlatformName: String]
    /// Variables kept per user (extracted by login) and per device (extracted by register), by slot.
    public var userVariables: [String]
    public var deviceVariables: [String]

    public init(
        name: String, login: APIStep? = nil, register: APIStep, unregister: APIStep? = nil, probe: APIStep? = nil,
        send: [Scenario.Traffic.Kind: APIStep] = [:], fetch: [Scenario.Traffic.Kind: APIStep] = [:], receive: ReceiveDescription = .init(),
        platformNames: [Scenario.PlatformName: String] = [:], userVariables: [String] = [], deviceVariables: [String] = []
    ) {
        self.name = name
        self.login = login
        self.register = register
        self.unregister = unregister
        self.probe = probe
        self.send = send
        self.fetch = fetch
        self.receive = receive
        self.platformNames = platformNames
        self.userVariables = userVariables
        self.deviceVariables = deviceVariables
    }

    public func step(_ kind: APIStepKind) -> APIStep? {
        switch kind {
        case .login: login
        case .register: register
        case .unregister: unregister
        case .probe: probe
        case .send(let traffic): send[traffic]
        case .fetch(let traffic): fetch[traffic]
        }
    }

    /// Every step, in the order a device and its senders meet them.
    public var steps: [APIStep] {
        [login, register, unregister, probe].compactMap { $0 } + Scenario.Traffic.Kind.allCases.compactMap { send[$0] }
            + Scenario.Traffic.Kind.allCases.compactMap { fetch[$0] }
    }

    /// The latency metrics the description's requests record (`http.register.put` …), each once.
    public var metricNames: [String] {
        var seen = Set<String>()
        return steps.flatMap { step in step.allRequests.compactMap(\.metric) }.filter { seen.insert($0).inserted }
    }

    public func platformName(_ platform: Scenario.PlatformName) -> String {
        platformNames[platform] ?? platform.rawValue
    }
}

/// The steps a description has, and the families that decide which variables each may use.
public enum APIStepKind: Hashable, Sendable, CustomStringConvertible {
    case login, register, unregister, probe
    case send(Scenario.Traffic.Kind)
    case fetch(Scenario.Traffic.Kind)

    public enum Family: Sendable, Hashable, CaseIterable {
        /// A user's own step, before any device.
        case login
        /// A device's registration steps.
        case device
        case probe
        /// A sender: a user, not a device.
        case send
        /// A device reading what a push named.
        case fetch
    }

    public var family: Family {
        switch self {
        case .login: .login
        case .register, .unregister: .device
        case .probe: .probe
        case .send: .send
        case .fetch: .fetch
        }
    }

    public var description: String {
        switch self {
        case .login: "login"
        case .register: "register"
        case .unregister: "unregister"
        case .probe: "probe"
        case .send(let kind): "send.\(kind.rawValue)"
        case .fetch(let kind): "fetch.\(kind.rawValue)"
        }
    }
}

/// One step: one or more requests made in order, with the rules that apply to them.
public struct APIStep: Sendable, Equatable {
    public var kind: APIStepKind
    /// The requests every platform makes; empty when the step is keyed by platform.
    public var requests: [APIRequest]
    /// Each platform's own form of the step (`register: {apns: …, fcm: …}`), for a backend with
    /// an endpoint per platform; empty when one set of requests serves every platform. A variant
    /// is a whole step of the same kind, local slots and content id slot, with its own requests
    /// (and, for a fetch, its own `content`). See ``on(_:)``.
    public var variants: [Scenario.PlatformName: APIStep]
    /// Sends only: one call per targeted platform (`{{platform}}` naming it), as the seed's app
    /// sends plain notifications with its switches; otherwise one call reaches every platform.
    /// A send keyed by platform makes one call per platform too (``callsPerPlatform``).
    public var perPlatform: Bool
    /// Fetches only: where the fetched content is in the answer (default: the whole body).
    public var content: ValueLocation
    /// Variables the step's answers give for its own later requests, by slot.
    public var localVariables: [String]
    /// Secure and rich sends: the local slot the backend's answer names the stored content's id
    /// in (`content_id:`, or an `extract: {id: …}` as older descriptions say it). The ledger ties
    /// a push naming that id to this send; nil: the send's answer does not name it.
    public var contentID: Int?

    public init(
        kind: APIStepKind, requests: [APIRequest], variants: [Scenario.PlatformName: APIStep] = [:], perPlatform: Bool = false,
        content: ValueLocation = .body, localVariables: [String] = [], contentID: Int? = nil
    ) {
        self.kind = kind
        self.requests = requests
        self.variants = variants
        self.perPlatform = perPlatform
        self.content = content
        self.localVariables = localVariables
        self.contentID = contentID
    }

    /// A fresh run of this step; of a step keyed by platform, run its platform's (``on(_:)``).
    public func makeRun() -> StepRun {
        StepRun(step: self, localSlots: localVariables.count)
    }
}

/// One templated HTTP request.
public struct APIRequest: Sendable, Equatable {
    /// Names the request in metrics (`http.register.put`) and error classes (`register.put:status_500`).
    public var name: String
    /// The latency metric its answers go to; nil when the step records itself (sends) or
    /// nothing (probes).
    public var metric: String?
    /// The bounded label its error classes start with.
    public var operation: String
    public var method: String
    /// Values in the path are percent-encoded as one segment's worth of text.
    public var path: Template
    public var query: [NamedTemplate]
    public var headers: [NamedTemplate]
    public var body: RequestBody?
    /// Statuses that mean success; anything else goes to the rules, then fails.
    public var expect: StatusSet
    /// Nil: the scenario's timeout for the step (`timeouts.register` …).
    public var timeout: Duration?
    public var extract: [Extraction]
    /// Skipped when every one of these already has a value (a cached registration id).
    public var skipWhenKnown: [VariableRef]
    /// The request's own rules, then the description's.
    public var rules: [StatusRule]

    public init(
        name: String, metric: String?, operation: String, method: String, path: Template, query: [NamedTemplate] = [],
        headers: [NamedTemplate] = [], body: RequestBody? = nil, expect: StatusSet = .success, timeout: Duration? = nil,
        extract: [Extraction] = [], skipWhenKnown: [VariableRef] = [], rules: [StatusRule] = []
    ) {
        self.name = name
        self.metric = metric
        self.operation = operation
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.body = body
        self.expect = expect
        self.timeout = timeout
        self.extract = extract
        self.skipWhenKnown = skipWhenKnown
        self.rules = rules
    }

    /// The first rule for this status, if any.
    public func rule(for status: Int) -> (index: Int, rule: StatusRule)? {
        rules.enumerated().first { $0.element.statuses.contains(status) }.map { ($0.offset, $0.element) }
    }
}

public struct NamedTemplate: Sendable, Equatable {
    public var name: String
    public var value: Template

    public init(name: String, value: Template) {
        self.name = name
        self.value = value
    }
}

public enum RequestBody: Sendable, Equatable {
    /// JSON with typed substitution (`"{{id}}"` alone keeps the value's JSON type).
    case json(JSONTemplate)
    /// `application/x-www-form-urlencoded`, each value encoded.
    case form([NamedTemplate])
    /// Text as written, with its content type.
    case text(Template, contentType: String)

    public var contentType: String {
        switch self {
        case .json: "application/json"
        case .form: "application/x-www-form-urlencoded"
        case .text(_, let type): type
        }
    }
}

/// Statuses, as ranges (`2xx` is 200…299).
public struct StatusSet: Sendable, Equatable, CustomStringConvertible {
    public var ranges: [ClosedRange<Int>]

    public init(_ ranges: [ClosedRange<Int>]) {
        self.ranges = ranges
    }

    public static let success = StatusSet([200...299])

    public func contains(_ status: Int) -> Bool {
        ranges.contains { $0.contains(status) }
    }

    public var description: String {
        ranges.map { range in
            if range.count == 100 && range.lowerBound % 100 == 0 { return "\(range.lowerBound / 100)xx" }
            return range.count == 1 ? "\(range.lowerBound)" : "\(range.lowerBound)-\(range.upperBound)"
        }.joined(separator: ", ")
    }
}

/// A value taken from an answer into a variable.
public struct Extraction: Sendable, Equatable {
    public var name: String
    public var variable: VariableRef
    /// Where to look, in order; the first found wins.
    public var sources: [ValueLocation]
    /// A missing value is not an error (a send's answer that may name the stored content).
    public var optional: Bool

    public init(name: String, variable: VariableRef, sources: [ValueLocation], optional: Bool = false) {
        self.name = name
        self.variable = variable
        self.sources = sources
        self.optional = optional
    }
}

/// Where a value is in an answer or a push.
public enum ValueLocation: Sendable, Equatable, CustomStringConvertible {
    /// An RFC 6901 JSON Pointer into a JSON body (`""` is the whole document: a JSON string
    /// body's text).
    case json(JSONPointer)
    /// A response header.
    case header(String)
    /// The value of a cookie the answer sets (`Set-Cookie: NAME=value; …`): a session or CSRF
    /// cookie, sent back as `Cookie: NAME={{var}}`.
    case cookie(String)
    /// The whole body as text.
    case body

    /// Whether reading it needs the answer's header fields, which are made on demand.
    public var readsHeaders: Bool {
        switch self {
        case .header, .cookie: true
        case .json, .body: false
        }
    }

    public var description: String {
        switch self {
        case .json(let pointer): "json \(pointer.source.isEmpty ? "\"\"" : pointer.source)"
        case .header(let name): "header \(name)"
        case .cookie(let name): "cookie \(name)"
        case .body: "the whole body"
        }
    }
}

/// What to do when a request answers a status it does not expect. Each rule fires at most
/// `times` times in one run of its step; then the status fails the step.
public struct StatusRule: Sendable, Equatable {
    public enum Then: String, Sendable, Equatable, CaseIterable {
        /// Repeat the request.
        case retry
        /// Run the step again from its first request (requests whose variables are known are
        /// skipped again): "on 410, forget the registration id and register again".
        case restart
        /// Log the user in again, then repeat the request.
        case login
        /// Fail at once.
        case fail
    }

    public var statuses: StatusSet
    /// Variables dropped before acting (a registration id the backend no longer knows).
    public var forget: [VariableRef]
    public var then: Then
    public var times: Int

    public init(statuses: StatusSet, forget: [VariableRef] = [], then: Then, times: Int = 1) {
        self.statuses = statuses
        self.forget = forget
        self.then = then
        self.times = times
    }
}
