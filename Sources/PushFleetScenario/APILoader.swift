import PushFleetCore
import Yams

/// Reads a scenario's `api:` section (or a preset's text, through the same code) into an
/// ``APIDescription``, resolving every template variable and reporting every problem at its
/// line and column.
struct APILoader {
    static let stepKeys = ["platforms", "headers", "on", "login", "register", "unregister", "probe", "send", "fetch", "receive"]
    static let requestKeys = [
        "name", "method", "path", "query", "headers", "json", "form", "text", "content_type", "expect", "timeout", "extract",
        "skip_when_known", "on",
    ]
    static let methods = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"]

    let r: NodeReader
    /// Prefixes key paths in messages (`api.` in a scenario).
    let prefix: String

    /// Where each stored variable lives, from a first pass over every step's extractions.
    private var stored: [String: (scope: VariableScope, slot: Int, step: APIStepKind)] = [:]
    private var userVariables: [String] = []
    private var deviceVariables: [String] = []
    private var locals: [APIStepKind: [String]] = [:]
    private var hasLogin = false

    init(reader: NodeReader, prefix: String) {
        self.r = reader
        self.prefix = prefix
    }

    private func path(_ key: String) -> String { prefix + key }

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
    /// user's, register's the device's, any other step's its own.
    private mutating func collectVariables(_ map: [String: Node]) {
        var entries: [(APIStepKind, Node)] = []
        for (key, kind) in [("login", APIStepKind.login), ("register", .register), ("unregister", .unregister), ("probe", .probe)] {
            if let node = map[key] { entries.append((kind, node)) }
        }
        for (key, send) in [("send", true), ("fetch", false)] {
            guard let byKind = map[key]?.mapping else { continue }
            for (kindNode, node) in byKind {
                guard let name = kindNode.string, let kind = Scenario.Traffic.Kind(rawValue: name) else { continue }
                entries.append((send ? .send(kind) : .fetch(kind), node))
            }
        }
        for (kind, node) in entries {
            for request in requestNodes(node) {
                guard let extract = request.mapping?[Node("extract")]?.mapping else { continue }
                for (keyNode, _) in extract {
                    guard let name = keyNode.string else { continue }
                    let scope: VariableScope =
                        switch kind {
                        case .login: .user
                        case .register: .device
                        default: .local
                        }
                    if scope == .local {
                        if locals[kind, default: []].contains(name) { continue }
                        if let existing = stored[name] {
                            r.report(keyNode, path("\(kind).extract.\(name)"), "'\(name)' is already extracted by \(existing.step); give it another name")
                            continue
                        }
                        locals[kind, default: []].append(name)
                        continue
                    }
                    if let existing = stored[name] {
                        if existing.step != kind {
                            r.report(keyNode, path("\(kind).extract.\(name)"), "'\(name)' is already extracted by \(existing.step); give it another name")
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
                    }
                    stored[name] = (scope, slot, kind)
                }
            }
        }
    }

    private func requestNodes(_ node: Node) -> [Node] {
        if let items = node.sequence { return Array(items) }
        if let requests = node.mapping?[Node("requests")]?.sequence { return Array(requests) }
        return [node]
    }

    /// Where `name` comes from in a step of `kind`, or why it cannot be used there.
    private func resolve(_ name: String, in kind: APIStepKind?) -> Result<VariableRef, TemplateError> {
        let family = kind?.family
        if let kind, let slot = locals[kind]?.firstIndex(of: name) { return .success(.stored(.local, slot: slot)) }
        if let builtin = BuiltinVariable(rawValue: name) {
            guard let family else {
                // Description-wide headers go into every step: only what every step has.
                return builtin.availability.count == APIStepKind.Family.allCases.count
                    ? .success(.builtin(builtin)) : .failure(TemplateError("{{\(name)}} is not known in every step; set this header in the steps that have it"))
            }
            guard builtin.availability.contains(family) else {
                return .failure(TemplateError("{{\(name)}} has no value in \(kind.map { "\($0)" } ?? "") steps (\(Self.availabilityText(builtin)))"))
            }
            return .success(.builtin(builtin))
        }
        guard let entry = stored[name] else {
            if let owner = locals.first(where: { $0.value.contains(name) })?.key {
                return .failure(TemplateError("'\(name)' is extracted by \(owner) and only known there"))
            }
            let known = BuiltinVariable.allCases.map(\.rawValue) + stored.keys
            return .failure(TemplateError("unknown variable '\(name)': no step extracts it and pushfleet does not provide it", suggestion: closest(to: name, in: known)))
        }
        switch entry.scope {
        case .user:
            if kind == .login { return .failure(TemplateError("'\(name)' is what login extracts; login cannot use it")) }
            // Default headers reach login too: an empty value there leaves the header out.
            return .success(.stored(.user, slot: entry.slot))
        case .device:
            guard let family, [.device, .probe, .fetch].contains(family) else {
                return .failure(TemplateError("'\(name)' is a device's value (from register); \(kind.map { "\($0)" } ?? "every") step is not a device's"))
            }
            return .success(.stored(.device, slot: entry.slot))
        case .local:
            return .failure(TemplateError("'\(name)' is extracted by \(entry.step) and only known there"))
        }
    }

    static func availabilityText(_ builtin: BuiltinVariable) -> String {
        switch builtin {
        case .devicePushToken, .devicePlatform, .deviceID: "a device's: register, unregister, probe, fetch"
        case .platform, .to, .message, .image, .imageType: "a send's"
        case .id: "a fetch's"
        case .victim: "a probe's"
        default: "everywhere"
        }
    }

    private func template(_ node: Node, _ keyPath: String, kind: APIStepKind?) -> Template? {
        guard let text = r.string(node, keyPath) else { return nil }
        switch Template.parse(text, resolve: { resolve($0, in: kind) }) {
        case .success(let template): return template
        case .failure(let error):
            r.report(node, keyPath, error.message, suggestion: error.suggestion)
            return nil
        }
    }

    // MARK: Steps and requests

    private func readStep(_ node: Node, _ stepPath: String, kind: APIStepKind, headers: [NamedTemplate], rules: [StatusRule]) -> APIStep? {
        var stepKeys: [String] = []
        if kind == .send(.plain) { stepKeys.append("per_platform") }
        if case .fetch = kind { stepKeys.append("content") }
        var requestNodes: [(Node, String)] = []
        var stepMap: [String: Node] = [:]
        if let items = node.sequence {
            requestNodes = items.enumerated().map { ($1, "\(stepPath)[\($0)]") }
        } else if let map = node.mapping, map[Node("requests")] != nil {
            guard let read = r.mapping(node, stepPath, allowed: ["requests"] + stepKeys) else { return nil }
            stepMap = read
            if let items = read["requests"].flatMap({ r.sequence($0, "\(stepPath).requests", "requests") }) {
                requestNodes = items.enumerated().map { ($1, "\(stepPath).requests[\($0)]") }
            }
        } else {
            requestNodes = [(node, stepPath)]
            if let map = node.mapping {
                for (key, value) in map {
                    if let name = key.string, stepKeys.contains(name) { stepMap[name] = value }
                }
            }
        }
        guard !requestNodes.isEmpty else {
            r.report(node, stepPath, "needs at least one request")
            return nil
        }
        if kind == .login && requestNodes.count > 1 { r.report(node, stepPath, "login is one request") }
        var requests: [APIRequest] = []
        var names = Set<String>()
        for (index, (requestNode, requestPath)) in requestNodes.enumerated() {
            guard var request = readRequest(requestNode, requestPath, kind: kind, index: index, count: requestNodes.count, extraKeys: stepKeys, headers: headers, rules: rules)
            else { continue }
            if !names.insert(request.name).inserted {
                request.name += "\(index + 1)"
                request.metric = request.metric.map { $0 + "\(index + 1)" }
                request.operation += "\(index + 1)"
            }
            requests.append(request)
        }
        var step = APIStep(kind: kind, requests: requests, localVariables: locals[kind] ?? [])
        if let flag = stepMap["per_platform"], let value = r.bool(flag, "\(stepPath).per_platform") { step.perPlatform = value }
        if let content = stepMap["content"], let location = readLocation(content, "\(stepPath).content", headers: false) { step.content = location }
        return step
    }

    private func readRequest(
        _ node: Node, _ requestPath: String, kind: APIStepKind, index: Int, count: Int, extraKeys: [String], headers defaults: [NamedTemplate],
        rules defaultRules: [StatusRule]
    ) -> APIRequest? {
        guard let map = r.mapping(node, requestPath, allowed: Self.requestKeys + extraKeys) else { return nil }
        var method = "GET"
        if let node = map["method"], let text = r.string(node, "\(requestPath).method") {
            if Self.methods.contains(text.uppercased()) {
                method = text.uppercased()
            } else {
                r.report(node, "\(requestPath).method", "'\(text)' is not one of \(Self.methods.joined(separator: ", "))", suggestion: closest(to: text.uppercased(), in: Self.methods))
            }
        }
        guard let pathNode = map["path"] else {
            r.report(node, "\(requestPath).path", "required: the request's path, e.g. /api/register/{{registration_id}}")
            return nil
        }
        // Read on after a bad path, so every problem is reported at once.
        let before = r.issues.count
        let path = template(pathNode, "\(requestPath).path", kind: kind) ?? Template(literal: "/")
        if !path.source.hasPrefix("/") { r.report(pathNode, "\(requestPath).path", "a path starts with '/' (the backend's base URL is the target's)") }
        let name = map["name"].flatMap { r.string($0, "\(requestPath).name") } ?? (count > 1 ? method.lowercased() : "")
        let (metric, operation) = Self.names(kind, request: name)
        var request = APIRequest(name: name, metric: metric, operation: operation, method: method, path: path)
        if let node = map["query"] { request.query = readNamed(node, "\(requestPath).query", kind: kind) }
        var headers = map["headers"].map { readHeaders($0, "\(requestPath).headers", family: kind) } ?? []
        let own = Set(headers.map { $0.name.lowercased() })
        // Login makes the user's values: description-wide headers that need them are not its.
        headers += defaults.filter { header in
            !own.contains(header.name.lowercased())
                && !(kind == .login && header.value.variables.contains { if case .stored(.user, _) = $0.ref { true } else { false } })
        }
        request.headers = headers
        let bodies = ["json", "form", "text"].filter { map[$0] != nil }
        if bodies.count > 1 { r.report(map[bodies[1]], "\(requestPath).\(bodies[1])", "give one body: json, form or text") }
        if let node = map["json"], let tree = jsonTree(node, "\(requestPath).json", kind: kind) {
            request.body = .json(JSONTemplate(tree))
        } else if let node = map["form"] {
            request.body = .form(readNamed(node, "\(requestPath).form", kind: kind))
        } else if let node = map["text"], let text = template(node, "\(requestPath).text", kind: kind) {
            let type = map["content_type"].flatMap { r.string($0, "\(requestPath).content_type") } ?? "text/plain; charset=utf-8"
            request.body = .text(text, contentType: type)
        }
        if map["content_type"] != nil && map["text"] == nil {
            r.report(map["content_type"], "\(requestPath).content_type", "content_type goes with a text body (json and form set their own)")
        }
        if let node = map["expect"], let statuses = readStatuses(node, "\(requestPath).expect") { request.expect = statuses }
        if let node = map["timeout"], let timeout = r.duration(node, "\(requestPath).timeout") {
            if timeout > .seconds(3600) { r.report(node, "\(requestPath).timeout", "at most 1h") } else { request.timeout = timeout }
        }
        if let node = map["extract"] { request.extract = readExtractions(node, "\(requestPath).extract", kind: kind) }
        if let node = map["skip_when_known"] {
            let items = node.sequence.map(Array.init) ?? [node]
            for item in items {
                guard let name = r.string(item, "\(requestPath).skip_when_known") else { continue }
                switch resolve(name, in: kind) {
                case .success(let ref) where Self.isStored(ref): request.skipWhenKnown.append(ref)
                case .success: r.report(item, "\(requestPath).skip_when_known", "'\(name)' always has a value; name an extracted variable")
                case .failure(let error): r.report(item, "\(requestPath).skip_when_known", error.message, suggestion: error.suggestion)
                }
            }
        }
        var rules = map["on"].map { readRules($0, "\(requestPath).on", step: kind) } ?? []
        rules += defaultRules.filter { rule in !(rule.then == .login && kind == .login) }
        request.rules = rules
        return r.issues.count == before ? request : nil
    }

    static func isStored(_ ref: VariableRef) -> Bool {
        if case .stored = ref { return true }
        return false
    }

    /// The metric and error-class label of a request: `http.register.put`, `register.put`.
    static func names(_ kind: APIStepKind, request name: String) -> (metric: String?, operation: String) {
        let suffix = name.isEmpty ? "" : ".\(name)"
        switch kind {
        case .login: return ("http.login\(suffix)", "login\(suffix)")
        case .register: return ("http.register\(suffix)", "register\(suffix)")
        case .unregister: return ("http.unregister\(suffix)", "unregister\(suffix)")
        case .probe: return (nil, "probe\(suffix)")
        case .send: return (nil, "send\(suffix)")
        case .fetch(let traffic): return ("http.fetch_\(traffic.rawValue)\(suffix)", "fetch_\(traffic.rawValue)\(suffix)")
        }
    }

    private func readNamed(_ node: Node, _ keyPath: String, kind: APIStepKind?) -> [NamedTemplate] {
        guard case .mapping(let mapping) = node else {
            r.report(node, keyPath, "expected a mapping of names to values")
            return []
        }
        var items: [NamedTemplate] = []
        for (keyNode, value) in mapping {
            guard let name = keyNode.string else { continue }
            if let value = template(value, "\(keyPath).\(name)", kind: kind) { items.append(NamedTemplate(name: name, value: value)) }
        }
        return items
    }

    private func readHeaders(_ node: Node, _ keyPath: String, family kind: APIStepKind?) -> [NamedTemplate] {
        let headers = readNamed(node, keyPath, kind: kind)
        for header in headers where header.name.isEmpty || !header.name.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: ":") }) {
            r.report(node, "\(keyPath).\(header.name)", "'\(header.name)' is not a header name")
        }
        return headers
    }

    /// A YAML value as a JSON document whose strings are templates; YAML's plain scalars keep
    /// their types (`5`, `true`, `null`), quoted ones are strings.
    private func jsonTree(_ node: Node, _ keyPath: String, kind: APIStepKind) -> JSONTemplate.Node? {
        switch node {
        case .mapping(let mapping):
            var members: [(key: String, value: JSONTemplate.Node)] = []
            var complete = true
            for (keyNode, value) in mapping {
                guard let key = keyNode.string, let child = jsonTree(value, "\(keyPath).\(key)", kind: kind) else {
                    complete = false
                    continue
                }
                members.append((key, child))
            }
            return complete ? .object(members) : nil
        case .sequence(let items):
            var children: [JSONTemplate.Node] = []
            var complete = true
            for (index, item) in items.enumerated() {
                guard let child = jsonTree(item, "\(keyPath)[\(index)]", kind: kind) else {
                    complete = false
                    continue
                }
                children.append(child)
            }
            return complete ? .array(children) : nil
        case .scalar(let scalar):
            if scalar.style == .plain {
                if node.null != nil && (scalar.string == "null" || scalar.string == "~") { return .literal("null") }
                if let value = node.bool { return .literal(value ? "true" : "false") }
                if node.int != nil || node.float != nil, Double(scalar.string) != nil { return .literal(scalar.string) }
            }
            return template(node, keyPath, kind: kind).map { .string($0) }
        default:
            r.report(node, keyPath, "expected a JSON value")
            return nil
        }
    }

    private func readStatuses(_ node: Node, _ keyPath: String) -> StatusSet? {
        let items = node.sequence.map(Array.init) ?? [node]
        var ranges: [ClosedRange<Int>] = []
        for item in items {
            guard let text = r.string(item, keyPath) else { continue }
            if let range = Self.statusRange(text) {
                ranges.append(range)
            } else {
                r.report(item, keyPath, "'\(text)' is not a status (100…599) or a class like 2xx")
            }
        }
        return ranges.isEmpty ? nil : StatusSet(ranges)
    }

    static func statusRange(_ text: String) -> ClosedRange<Int>? {
        let lower = text.lowercased()
        if lower.count == 3, lower.hasSuffix("xx"), let hundred = Int(lower.prefix(1)), (1...5).contains(hundred) {
            return hundred * 100...hundred * 100 + 99
        }
        guard let status = Int(text), (100...599).contains(status) else { return nil }
        return status...status
    }

    private func readRules(_ node: Node, _ keyPath: String, step: APIStepKind?) -> [StatusRule] {
        guard case .mapping(let mapping) = node else {
            r.report(node, keyPath, "expected a mapping of status to rule, e.g. {410: {forget: [registration_id], then: restart}}")
            return []
        }
        var rules: [StatusRule] = []
        for (keyNode, value) in mapping {
            guard let key = keyNode.string else { continue }
            let rulePath = "\(keyPath).\(key)"
            guard let statuses = readStatuses(keyNode, rulePath) else { continue }
            guard let map = r.mapping(value, rulePath, allowed: ["forget", "then", "times"]) else { continue }
            var rule = StatusRule(statuses: statuses, then: .fail)
            if let thenNode = map["then"], let then = r.choice(thenNode, "\(rulePath).then", StatusRule.Then.self) {
                rule.then = then
                if then == .login && !hasLogin {
                    r.report(thenNode, "\(rulePath).then", "names the step 'login', which this api does not have")
                }
                if then == .login && step == .login {
                    r.report(thenNode, "\(rulePath).then", "login cannot log in again")
                }
            } else if map["then"] == nil {
                r.report(value, "\(rulePath).then", "required: retry, restart, login or fail")
            }
            if let timesNode = map["times"], let times = r.int(timesNode, "\(rulePath).times", in: 1...10) { rule.times = times }
            if let forgetNode = map["forget"] {
                let items = forgetNode.sequence.map(Array.init) ?? [forgetNode]
                for item in items {
                    guard let name = r.string(item, "\(rulePath).forget") else { continue }
                    switch resolve(name, in: step) {
                    case .success(let ref):
                        if case .stored(.user, _) = ref {
                            r.report(item, "\(rulePath).forget", "'\(name)' is the user's; logging in again (then: login) replaces it")
                        } else if Self.isStored(ref) {
                            rule.forget.append(ref)
                        } else {
                            r.report(item, "\(rulePath).forget", "'\(name)' is pushfleet's own; only extracted variables can be forgotten")
                        }
                    case .failure(let error): r.report(item, "\(rulePath).forget", error.message, suggestion: error.suggestion)
                    }
                }
            }
            rules.append(rule)
        }
        return rules
    }

    private func readExtractions(_ node: Node, _ keyPath: String, kind: APIStepKind) -> [Extraction] {
        guard case .mapping(let mapping) = node else {
            r.report(node, keyPath, "expected a mapping of variable to where its value is, e.g. {token: /token}")
            return []
        }
        var extractions: [Extraction] = []
        for (keyNode, value) in mapping {
            guard let name = keyNode.string else { continue }
            let itemPath = "\(keyPath).\(name)"
            guard name.first.map({ $0.isLetter || $0 == "_" }) == true, name.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" }) else {
                r.report(keyNode, itemPath, "a variable name has letters, digits and '_' and starts with a letter")
                continue
            }
            if BuiltinVariable(rawValue: name) != nil && name != "id" {
                r.report(keyNode, itemPath, "'\(name)' is pushfleet's own variable; extract into another name")
                continue
            }
            var optional = false
            var locationNode = value
            if let map = value.mapping, map[Node("optional")] != nil {
                guard let read = r.mapping(value, itemPath, allowed: ["json", "header", "cookie", "body", "optional"]) else { continue }
                optional = read["optional"].flatMap { r.bool($0, "\(itemPath).optional") } ?? false
                locationNode = .mapping(Node.Mapping(map.filter { $0.key.string != "optional" }.map { ($0.key, $0.value) }))
            }
            let sources = readLocations(locationNode, itemPath, headers: true)
            guard !sources.isEmpty else { continue }
            let ref: VariableRef
            if let slot = locals[kind]?.firstIndex(of: name) {
                ref = .stored(.local, slot: slot)
            } else if let entry = stored[name] {
                ref = .stored(entry.scope, slot: entry.slot)
            } else {
                continue
            }
            extractions.append(Extraction(name: name, variable: ref, sources: sources, optional: optional))
        }
        return extractions
    }

    /// `"/pointer"`, `body`, `{json: P}`, `{header: NAME}`, `{cookie: NAME}`, `{body: true}`, or a list of those.
    private func readLocations(_ node: Node, _ keyPath: String, headers: Bool) -> [ValueLocation] {
        if let items = node.sequence { return items.enumerated().compactMap { readLocation($1, "\(keyPath)[\($0)]", headers: headers) } }
        if let map = node.mapping, let json = map[Node("json")]?.sequence, map.count == 1 {
            return json.enumerated().compactMap { readLocation(.mapping(Node.Mapping([(Node("json"), $1)])), "\(keyPath).json[\($0)]", headers: headers) }
        }
        return readLocation(node, keyPath, headers: headers).map { [$0] } ?? []
    }

    private func readLocation(_ node: Node, _ keyPath: String, headers: Bool) -> ValueLocation? {
        if let text = node.string {
            if text == "body" { return .body }
            return pointer(text, node, keyPath).map { .json($0) }
        }
        let keys = headers ? ["json", "header", "cookie", "body"] : ["json", "body"]
        guard let map = r.mapping(node, keyPath, allowed: keys), map.count == 1, let (key, value) = map.first else {
            if node.mapping?.count ?? 0 > 1 { r.report(node, keyPath, "give one of \(keys.joined(separator: ", "))") }
            return nil
        }
        switch key {
        case "json": return r.string(value, "\(keyPath).json").flatMap { pointer($0, value, "\(keyPath).json") }.map { .json($0) }
        case "header": return r.string(value, "\(keyPath).header").map { .header($0) }
        case "cookie":
            guard let name = r.string(value, "\(keyPath).cookie") else { return nil }
            guard !name.isEmpty, name.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F && !"()<>@,;:\\\"/[]?={}".unicodeScalars.contains($0) }) else {
                r.report(value, "\(keyPath).cookie", "'\(name)' is not a cookie name (a token: no spaces, separators or '=')")
                return nil
            }
            return .cookie(name)
        default: return r.bool(value, "\(keyPath).body") == true ? .body : nil
        }
    }

    private func pointer(_ text: String, _ node: Node, _ keyPath: String) -> JSONPointer? {
        do {
            return try JSONPointer(text)
        } catch {
            r.report(node, keyPath, "'\(text)': \(error.message); or 'body' for the whole body")
            return nil
        }
    }

    // MARK: Receiving

    private func readReceive(_ node: Node, _ keyPath: String) -> ReceiveDescription {
        var receive = ReceiveDescription()
        guard let map = r.mapping(node, keyPath, allowed: Scenario.PlatformName.allCases.map(\.rawValue)) else { return receive }
        for (key, value) in map {
            guard let platform = Scenario.PlatformName(rawValue: key) else { continue }
            let platformPath = "\(keyPath).\(key)"
            guard let fields = r.mapping(value, platformPath, allowed: ["token", "secure_id", "rich_id", "rich_message", "nonce"]) else { continue }
            if let tokenNode = fields["token"], let shape = r.choice(tokenNode, "\(platformPath).token", TokenShape.self) {
                receive.tokens[platform] = shape
            }
            var layout = PushLayout()
            func places(_ field: String) -> [PushLocation] {
                guard let node = fields[field] else { return [] }
                let items = node.sequence.map(Array.init) ?? [node]
                return items.enumerated().compactMap { index, item in
                    let itemPath = items.count > 1 ? "\(platformPath).\(field)[\(index)]" : "\(platformPath).\(field)"
                    var pushType: String?
                    var locationNode = item
                    if let map = item.mapping, map[Node("push_type")] != nil {
                        guard let read = r.mapping(item, itemPath, allowed: ["json", "body", "push_type"]) else { return nil }
                        pushType = read["push_type"].flatMap { r.string($0, "\(itemPath).push_type") }
                        locationNode = .mapping(Node.Mapping(map.filter { $0.key.string != "push_type" }.map { ($0.key, $0.value) }))
                    }
                    return readLocation(locationNode, itemPath, headers: false).map { PushLocation($0, pushType: pushType) }
                }
            }
            layout.secureID = places("secure_id")
            layout.richID = places("rich_id")
            layout.richMessage = places("rich_message")
            layout.nonce = places("nonce")
            receive.layouts[platform] = layout
        }
        return receive
    }
}
