import PushFleetCore
import Yams

/// Reads a scenario's `api:` section (or a preset's text, through the same code) into an
/// ``APIDescription``, resolving every template variable and reporting every problem at its
/// line and column.
struct APILoader {
    static let stepKeys = ["platforms", "headers", "on", "login", "register", "unregister", "probe", "send", "fetch", "receive"]
    static let requestKeys = [
        "name", "method", "path", "query", "headers", "json", "form", "text", "content_type", "expect", "timeout", "extract",
        "skip_when_known", "on", "content_id",
    ]
    /// The local slot a secure or rich send's `content_id:` is read into: not a variable name, so
    /// no template can name it by mistake.
    static let contentIDSlotName = "content id"
    static let methods = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"]

    /// Where an `extract` entry is written, for the warnings about values nothing uses.
    struct ExtractionSite {
        var name: String
        var kind: APIStepKind
        var key: Node
        var location: Node
        var path: String
    }

    let r: NodeReader
    /// Prefixes key paths in messages (`api.` in a scenario).
    let prefix: String
    /// The platforms the fleet has devices on: a device step keyed by platform must name each
    /// (every platform when the description is read on its own, as a preset is).
    let fleetPlatforms: [Scenario.PlatformName]

    /// Where each stored variable lives, from a first pass over every step's extractions.
    private(set) var stored: [String: (scope: VariableScope, slot: Int, step: APIStepKind)] = [:]
    private(set) var userVariables: [String] = []
    private(set) var deviceVariables: [String] = []
    private(set) var locals: [APIStepKind: [String]] = [:]
    /// The local slot of each secure or rich send's `content_id:`.
    private(set) var contentSlots: [APIStepKind: Int] = [:]
    /// The platforms whose requests extract each of register's values, and each step's own: on
    /// any other platform the value never has one.
    private(set) var deviceValuesOn: [String: Set<Scenario.PlatformName>] = [:]
    private(set) var localValuesOn: [APIStepKind: [String: Set<Scenario.PlatformName>]] = [:]
    /// The platforms the register step has requests for (a platform it leaves out is an error
    /// of its own, not one per value).
    private(set) var registerPlatforms = Set(Scenario.PlatformName.allCases)
    private(set) var extractionSites: [ExtractionSite] = []
    private(set) var hasLogin = false

    init(reader: NodeReader, prefix: String, fleetPlatforms: [Scenario.PlatformName] = Scenario.PlatformName.allCases) {
        self.r = reader
        self.prefix = prefix
        self.fleetPlatforms = fleetPlatforms
    }

    func path(_ key: String) -> String { prefix + key }

    /// The description in `node`; nil when it has problems (reported).
    mutating func read(_ node: Node, name: String) -> APIDescription? {
        guard let map = r.mapping(node, String(prefix.dropLast()), allowed: Self.stepKeys) else { return nil }
        let before = r.issues.count
        hasLogin = map["login"] != nil
        collectVariables(map)

        var defaultHeaders: [NamedTemplate] = []
        if let headers = map["headers"] { defaultHeaders = readHeaders(headers, path("headers"), family: nil) }
        var defaultRules: [StatusRule] = []
        if let rules = map["on"] { defaultRules = readRules(rules, path("on"), step: nil) }

        func step(_ kind: APIStepKind, _ key: String) -> APIStep? {
            guard let node = map[key] else { return nil }
            return readStep(node, path(key), kind: kind, headers: defaultHeaders, rules: defaultRules)
        }
        let login = step(.login, "login")
        let register = step(.register, "register")
        let unregister = step(.unregister, "unregister")
        let probe = step(.probe, "probe")
        var sends: [Scenario.Traffic.Kind: APIStep] = [:]
        var fetches: [Scenario.Traffic.Kind: APIStep] = [:]
        for (key, target) in [("send", true), ("fetch", false)] {
            guard let node = map[key] else { continue }
            let kinds = target ? Scenario.Traffic.Kind.allCases : [.secure, .rich]
            guard let byKind = r.mapping(node, path(key), allowed: kinds.map(\.rawValue)) else { continue }
            for (kindName, stepNode) in byKind {
                guard let kind = Scenario.Traffic.Kind(rawValue: kindName) else { continue }
                let parsed = readStep(
                    stepNode, path("\(key).\(kindName)"), kind: target ? .send(kind) : .fetch(kind), headers: defaultHeaders, rules: defaultRules
                )
                if target { sends[kind] = parsed } else { fetches[kind] = parsed }
            }
        }
        var platformNames: [Scenario.PlatformName: String] = [:]
        if let node = map["platforms"], let names = r.mapping(node, path("platforms"), allowed: Scenario.PlatformName.allCases.map(\.rawValue)) {
            for (key, value) in names {
                if let text = r.string(value, path("platforms.\(key)")), let platform = Scenario.PlatformName(rawValue: key) {
                    platformNames[platform] = text
                }
            }
        }
        let receive = map["receive"].map { readReceive($0, path("receive")) } ?? ReceiveDescription()
        guard r.issues.count == before else { return nil }
        warnAboutExtractions([login, register, unregister, probe].compactMap { $0 } + Array(sends.values) + Array(fetches.values))
        guard let register else {
            // Checked against the lifecycle by the scenario's cross-checks.
            return APIDescription(
                name: name, login: login, register: APIStep(kind: .register, requests: []), unregister: unregister, probe: probe,
                send: sends, fetch: fetches, receive: receive, platformNames: platformNames, userVariables: userVariables,
                deviceVariables: deviceVariables
            )
        }
        return APIDescription(
            name: name, login: login, register: register, unregister: unregister, probe: probe, send: sends, fetch: fetches,
            receive: receive, platformNames: platformNames, userVariables: userVariables, deviceVariables: deviceVariables
        )
    }

    // MARK: Variables

    /// First pass: every name an extraction defines, and where it lives. Login's values are the
    /// user's, register's the device's, any other step's its own. A step keyed by platform has
    /// one set of slots for all its platforms; which platforms extract each value is noted.
    private mutating func collectVariables(_ map: [String: Node]) {
        var entries: [(APIStepKind, Node, String)] = []
        for (key, kind) in [("login", APIStepKind.login), ("register", .register), ("unregister", .unregister), ("probe", .probe)] {
            if let node = map[key] { entries.append((kind, node, path(key))) }
        }
        for (key, send) in [("send", true), ("fetch", false)] {
            guard let byKind = map[key]?.mapping else { continue }
            for (kindNode, node) in byKind {
                guard let name = kindNode.string, let kind = Scenario.Traffic.Kind(rawValue: name) else { continue }
                entries.append((send ? .send(kind) : .fetch(kind), node, path("\(key).\(name)")))
            }
        }
        if let register = map["register"], let byPlatform = Self.platformKeyed(register) {
            registerPlatforms = Set(byPlatform.keys.compactMap { $0.string.flatMap(Scenario.PlatformName.init(rawValue:)) })
        }
        for (kind, node, stepPath) in entries {
            for (platform, request, requestPath) in Self.requestNodes(node, stepPath) {
                if Self.storesContent(kind), request.mapping?[Node("content_id")] != nil, contentSlots[kind] == nil {
                    contentSlots[kind] = locals[kind, default: []].count
                    locals[kind, default: []].append(Self.contentIDSlotName)
                }
                guard let extract = request.mapping?[Node("extract")]?.mapping else { continue }
                let on = platform.map { Set([$0]) } ?? Set(Scenario.PlatformName.allCases)
                for (keyNode, valueNode) in extract {
                    guard let name = keyNode.string else { continue }
                    extractionSites.append(ExtractionSite(name: name, kind: kind, key: keyNode, location: valueNode, path: "\(requestPath).extract.\(name)"))
                    let scope: VariableScope =
                        switch kind {
                        case .login: .user
                        case .register: .device
                        default: .local
                        }
                    if scope == .local {
                        if locals[kind, default: []].contains(name) {
                            localValuesOn[kind, default: [:]][name, default: []].formUnion(on)
                            continue
                        }
                        if let existing = stored[name] {
                            r.report(keyNode, path("\(kind).extract.\(name)"), "'\(name)' is already extracted by \(existing.step); give it another name")
                            continue
                        }
                        locals[kind, default: []].append(name)
                        localValuesOn[kind, default: [:]][name, default: []].formUnion(on)
                        continue
                    }
                    if let existing = stored[name] {
                        if existing.step != kind {
                            r.report(keyNode, path("\(kind).extract.\(name)"), "'\(name)' is already extracted by \(existing.step); give it another name")
                        } else if scope == .device {
                            deviceValuesOn[name, default: []].formUnion(on)
                        }
                        continue
                    }
                    let slot: Int
                    if scope == .user {
                        slot = userVariables.count
                        userVariables.append(name)
                    } else {
                        slot = deviceVariables.count
                        deviceVariables.append(name)
                        deviceValuesOn[name, default: []].formUnion(on)
                    }
                    stored[name] = (scope, slot, kind)
                }
            }
        }
    }

    /// Secure and rich sends store content the push names by id.
    static func storesContent(_ kind: APIStepKind) -> Bool {
        if case .send(let traffic) = kind { return traffic != .plain }
        return false
    }

    /// The mapping of a step keyed by platform (`{apns: …, fcm: …}`), if the step is one.
    static func platformKeyed(_ node: Node) -> Node.Mapping? {
        guard let map = node.mapping, map.keys.contains(where: { $0.string.flatMap(Scenario.PlatformName.init(rawValue:)) != nil }) else { return nil }
        return map
    }

    /// Every request node of a step with its key path, and its platform when the step is keyed
    /// by platform.
    static func requestNodes(_ node: Node, _ stepPath: String) -> [(platform: Scenario.PlatformName?, node: Node, path: String)] {
        if let map = platformKeyed(node) {
            return map.flatMap { key, value -> [(platform: Scenario.PlatformName?, node: Node, path: String)] in
                guard let platform = key.string.flatMap(Scenario.PlatformName.init(rawValue:)) else { return [] }
                return formRequestNodes(value, "\(stepPath).\(platform.rawValue)").map { (platform, $0.node, $0.path) }
            }
        }
        return formRequestNodes(node, stepPath).map { (nil, $0.node, $0.path) }
    }

    /// The request nodes of one form: a list, `{requests: […]}`, or one request.
    static func formRequestNodes(_ node: Node, _ stepPath: String) -> [(node: Node, path: String)] {
        if let items = node.sequence { return items.enumerated().map { ($1, "\(stepPath)[\($0)]") } }
        if let requests = node.mapping?[Node("requests")]?.sequence { return requests.enumerated().map { ($1, "\(stepPath).requests[\($0)]") } }
        return [(node, stepPath)]
    }
}
