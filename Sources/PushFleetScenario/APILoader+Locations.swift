import PushFleetCore
import Yams

extension APILoader {
    func readExtractions(_ node: Node, _ keyPath: String, kind: APIStepKind) -> [Extraction] {
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
            guard let (sources, optional) = readValueEntry(value, itemPath) else { continue }
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

    /// Where one value is in an answer: a location or a list of them (first found wins), or
    /// `{…, optional: true}` for a value that may be missing. One `extract` entry, or `content_id`.
    func readValueEntry(_ value: Node, _ itemPath: String) -> (sources: [ValueLocation], optional: Bool)? {
        var optional = false
        var locationNode = value
        if let map = value.mapping, map[Node("optional")] != nil {
            guard let read = r.mapping(value, itemPath, allowed: ["json", "header", "cookie", "body", "optional"]) else { return nil }
            optional = read["optional"].flatMap { r.bool($0, "\(itemPath).optional") } ?? false
            locationNode = .mapping(Node.Mapping(map.filter { $0.key.string != "optional" }.map { ($0.key, $0.value) }))
        }
        let sources = readLocations(locationNode, itemPath, headers: true)
        return sources.isEmpty ? nil : (sources, optional)
    }

    /// `"/pointer"`, `body`, `{json: P}`, `{header: NAME}`, `{cookie: NAME}`, `{body: true}`, or a list of those.
    private func readLocations(_ node: Node, _ keyPath: String, headers: Bool) -> [ValueLocation] {
        if let items = node.sequence { return items.enumerated().compactMap { readLocation($1, "\(keyPath)[\($0)]", headers: headers) } }
        if let map = node.mapping, let json = map[Node("json")]?.sequence, map.count == 1 {
            return json.enumerated().compactMap { readLocation(.mapping(Node.Mapping([(Node("json"), $1)])), "\(keyPath).json[\($0)]", headers: headers) }
        }
        return readLocation(node, keyPath, headers: headers).map { [$0] } ?? []
    }

    func readLocation(_ node: Node, _ keyPath: String, headers: Bool) -> ValueLocation? {
        if let text = node.string {
            if text == "body" { return .body }
            return pointer(text, node, keyPath).map { .json($0) }
        }
        let keys = headers ? ["json", "header", "cookie", "body"] : ["json", "body"]
        guard let map = r.mapping(node, keyPath, allowed: keys), map.count == 1, let (key, value) = map.first else {
            if let count = node.mapping?.count, count != 1 { r.report(node, keyPath, "give one of \(keys.joined(separator: ", "))") }
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

    func readReceive(_ node: Node, _ keyPath: String) -> ReceiveDescription {
        var receive = ReceiveDescription()
        guard let map = r.mapping(node, keyPath, allowed: Scenario.PlatformName.allCases.map(\.rawValue)) else { return receive }
        for (key, value) in map {
            guard let platform = Scenario.PlatformName(rawValue: key) else { continue }
            let platformPath = "\(keyPath).\(key)"
            let webPushKeys = platform == .webpush ? ["application_server_key", "services", "endpoints"] : []
            guard let fields = r.mapping(value, platformPath, allowed: ["token", "secure_id", "rich_id", "rich_message", "nonce"] + webPushKeys) else {
                continue
            }
            if platform == .webpush { receive.webPush = readWebPush(fields, platformPath) }
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

    /// `application_server_key: KEY` or `{path: /…, json: /pointer}`; `services: [fcm, …]`;
    /// `endpoints: local | public`.
    private func readWebPush(_ fields: [String: Node], _ keyPath: String) -> WebPushReceive {
        var webPush = WebPushReceive()
        if let node = fields["application_server_key"] {
            let path = "\(keyPath).application_server_key"
            if let text = node.string {
                if WebPushReceive.isKeyShaped(text) {
                    webPush.applicationServerKey = .literal(text)
                } else {
                    r.report(node, path, "expected the VAPID public key (base64url of the 65-byte uncompressed P-256 point), or {path: /…, json: /pointer}")
                }
            } else if let map = r.mapping(node, path, allowed: ["path", "json", "body", "header"]) {
                let target = map["path"].flatMap { r.string($0, "\(path).path") }
                if map["path"] == nil { r.report(node, path, "give the path the key is read from: {path: /…, json: /pointer}") }
                let rest = Node.Mapping(node.mapping!.filter { $0.key.string != "path" }.map { ($0.key, $0.value) })
                if let target, !target.hasPrefix("/") || target.contains(where: { $0.isWhitespace || $0.isNewline }) {
                    r.report(map["path"]!, "\(path).path", "'\(target)' is not a path on the backend (it starts with '/' and has no spaces)")
                } else if let target, let location = rest.isEmpty ? ValueLocation.body : readLocation(.mapping(rest), path, headers: true) {
                    webPush.applicationServerKey = .fetch(path: target, location: location)
                }
            }
        }
        if let node = fields["endpoints"], let endpoints = r.choice(node, "\(keyPath).endpoints", WebPushReceive.Endpoints.self) {
            webPush.endpoints = endpoints
        }
        if let node = fields["services"] {
            let path = "\(keyPath).services"
            let items = node.sequence.map(Array.init) ?? [node]
            let services = items.enumerated().compactMap { index, item in
                r.choice(item, items.count > 1 ? "\(path)[\(index)]" : path, WebPushReceive.Service.self)
            }
            if items.isEmpty { r.report(node, path, "name at least one of \(WebPushReceive.Service.allCases.map(\.rawValue).joined(separator: ", "))") }
            if !services.isEmpty { webPush.services = services }
        }
        return webPush
    }
}
