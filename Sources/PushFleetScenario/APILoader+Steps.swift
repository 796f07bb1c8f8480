import PushFleetCore
import Yams

extension APILoader {
    /// A step in any of its forms: one request, a list, `{requests: …}`, or a mapping keyed by
    /// platform whose values are each one of those.
    func readStep(_ node: Node, _ stepPath: String, kind: APIStepKind, headers: [NamedTemplate], rules: [StatusRule]) -> APIStep? {
        guard let byPlatform = Self.platformKeyed(node) else {
            guard var step = readForm(node, stepPath, kind: kind, platform: nil, headers: headers, rules: rules) else { return nil }
            step.contentID = contentSlot(kind)
            return step
        }
        guard kind != .login else {
            r.report(node, stepPath, "login is the user's, made once for all of a user's devices: one request, not one per platform")
            return nil
        }
        let platformNames = Scenario.PlatformName.allCases.map(\.rawValue)
        var variants: [Scenario.PlatformName: APIStep] = [:]
        var complete = true
        for (keyNode, value) in byPlatform {
            let key = keyNode.string ?? ""
            guard let platform = Scenario.PlatformName(rawValue: key) else {
                r.report(
                    keyNode, "\(stepPath).\(key)",
                    "a step keyed by platform has only \(platformNames.joined(separator: ", ")), each with its own requests; '\(key)' belongs inside them",
                    suggestion: closest(to: key, in: platformNames)
                )
                complete = false
                continue
            }
            let variantPath = "\(stepPath).\(key)"
            if Self.platformKeyed(value) != nil {
                r.report(value, variantPath, "a platform's requests are one request, a list or {requests: [...]}, not keyed by platform again")
                complete = false
                continue
            }
            guard var variant = readForm(value, variantPath, kind: kind, platform: platform, headers: headers, rules: rules) else {
                complete = false
                continue
            }
            variant.contentID = contentSlot(kind)
            variants[platform] = variant
        }
        guard complete else { return nil }
        if kind.family != .send {
            // A send's platforms are the traffic's to choose (checked against it); a device's are the fleet's.
            let missing = fleetPlatforms.filter { variants[$0] == nil }
            if !missing.isEmpty {
                r.report(
                    node, stepPath,
                    "the fleet has \(Self.list(fleetPlatforms)) devices; \(kind) has no requests for \(Self.list(missing)) (a platform the fleet does not use may be left out)"
                )
            }
        }
        return APIStep(kind: kind, requests: [], variants: variants, localVariables: locals[kind] ?? [], contentID: contentSlot(kind))
    }

    /// The local slot a secure or rich send's stored-content id is read into: `content_id:`, or
    /// (as older descriptions say it) an extraction named `id`.
    func contentSlot(_ kind: APIStepKind) -> Int? {
        guard Self.storesContent(kind) else { return nil }
        return contentSlots[kind] ?? locals[kind]?.firstIndex(of: "id")
    }

    static func list(_ platforms: [Scenario.PlatformName]) -> String {
        let names = platforms.map(\.rawValue)
        guard names.count > 1 else { return names.first ?? "no" }
        return names.dropLast().joined(separator: ", ") + " and " + names.last!
    }

    /// One form of a step (for one platform, or for all when `platform` is nil): one request, a
    /// list, or `{requests: [...], per_platform, content}`.
    private func readForm(
        _ node: Node, _ stepPath: String, kind: APIStepKind, platform: Scenario.PlatformName?, headers: [NamedTemplate], rules: [StatusRule]
    ) -> APIStep? {
        var stepKeys: [String] = []
        if case .send = kind { stepKeys.append("per_platform") }
        if case .fetch = kind { stepKeys.append("content") }
        var requestNodes: [(Node, String)] = []
        var stepMap: [String: Node] = [:]
        if let items = node.sequence {
            requestNodes = items.enumerated().map { ($1, "\(stepPath)[\($0)]") }
        } else if let map = node.mapping, map[Node("requests")] != nil {
            guard let read = r.mapping(node, stepPath, allowed: ["requests", "content_id"] + stepKeys) else { return nil }
            if let misplaced = map.first(where: { $0.key.string == "content_id" })?.key {
                r.report(misplaced, "\(stepPath).content_id", "content_id goes in the request whose answer names the stored content, inside requests")
            }
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
        var contentIDFrom: Int?
        for (index, (requestNode, requestPath)) in requestNodes.enumerated() {
            if let contentKey = requestNode.mapping?.first(where: { $0.key.string == "content_id" })?.key, Self.storesContent(kind) {
                if let first = contentIDFrom {
                    r.report(contentKey, "\(requestPath).content_id", "the stored content's id is already read from request \(first + 1); give content_id once")
                }
                contentIDFrom = contentIDFrom ?? index
            }
            guard var request = readRequest(requestNode, requestPath, kind: kind, index: index, count: requestNodes.count, extraKeys: stepKeys, headers: headers, rules: rules)
            else { continue }
            checkPlatformValues(request, requestNode, requestPath, kind: kind, platform: platform)
            if !names.insert(request.name).inserted {
                request.name += "\(index + 1)"
                request.metric = request.metric.map { $0 + "\(index + 1)" }
                request.operation += "\(index + 1)"
            }
            requests.append(request)
        }
        var step = APIStep(kind: kind, requests: requests, localVariables: locals[kind] ?? [])
        if let flag = stepMap["per_platform"], let value = r.bool(flag, "\(stepPath).per_platform") {
            if platform != nil && value {
                r.report(flag, "\(stepPath).per_platform", "a send keyed by platform makes one call per targeted platform already; leave per_platform out")
            }
            step.perPlatform = value
        }
        if let content = stepMap["content"], let location = readLocation(content, "\(stepPath).content", headers: false) { step.content = location }
        return step
    }

    /// A value that some platforms' requests extract has none on the others: using it in a
    /// request those others make is an error, said for the platforms that lack it.
    private func checkPlatformValues(_ request: APIRequest, _ node: Node, _ requestPath: String, kind: APIStepKind, platform: Scenario.PlatformName?) {
        let platforms = platform.map { [$0] } ?? fleetPlatforms
        var checked = Set<String>()
        for ref in request.variables {
            let name: String
            let owner: APIStepKind
            let extractedOn: Set<Scenario.PlatformName>?
            switch ref {
            case .stored(.device, let slot) where slot < deviceVariables.count:
                name = deviceVariables[slot]
                owner = .register
                extractedOn = deviceValuesOn[name]
            case .stored(.local, let slot) where slot < (locals[kind]?.count ?? 0):
                name = locals[kind]![slot]
                owner = kind
                extractedOn = localValuesOn[kind]?[name]
            default: continue
            }
            guard let extractedOn, checked.insert(name).inserted else { continue }
            let lacking = platforms.filter { !extractedOn.contains($0) && (owner != .register || registerPlatforms.contains($0)) }
            guard !lacking.isEmpty else { continue }
            let sources = Scenario.PlatformName.allCases.filter(extractedOn.contains)
            r.report(
                node, requestPath,
                "{{\(name)}} has no value on \(Self.list(lacking)): \(owner) extracts it only in its \(Self.list(sources)) requests"
            )
        }
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
        if let node = map["content_id"] {
            if Self.storesContent(kind), let slot = contentSlots[kind] {
                if let (sources, optional) = readValueEntry(node, "\(requestPath).content_id") {
                    request.extract.append(Extraction(name: "content_id", variable: .stored(.local, slot: slot), sources: sources, optional: optional))
                }
            } else {
                r.report(
                    map["content_id"], "\(requestPath).content_id",
                    "content_id says where a secure or rich send's answer names the content it stored; \(kind) stores none"
                )
            }
        }
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
}
