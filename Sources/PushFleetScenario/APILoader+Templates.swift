import PushFleetCore
import Yams

extension APILoader {
    /// Where `name` comes from in a step of `kind`, or why it cannot be used there.
    func resolve(_ name: String, in kind: APIStepKind?) -> Result<VariableRef, TemplateError> {
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

    func template(_ node: Node, _ keyPath: String, kind: APIStepKind?) -> Template? {
        guard let text = r.string(node, keyPath) else { return nil }
        switch Template.parse(text, resolve: { resolve($0, in: kind) }) {
        case .success(let template): return template
        case .failure(let error):
            r.report(node, keyPath, error.message, suggestion: error.suggestion)
            return nil
        }
    }

    func readNamed(_ node: Node, _ keyPath: String, kind: APIStepKind?) -> [NamedTemplate] {
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

    func readHeaders(_ node: Node, _ keyPath: String, family kind: APIStepKind?) -> [NamedTemplate] {
        let headers = readNamed(node, keyPath, kind: kind)
        for header in headers where header.name.isEmpty || !header.name.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: ":") }) {
            r.report(node, "\(keyPath).\(header.name)", "'\(header.name)' is not a header name")
        }
        return headers
    }

    /// A YAML value as a JSON document whose strings are templates; YAML's plain scalars keep
    /// their types (`5`, `true`, `null`), quoted ones are strings.
    func jsonTree(_ node: Node, _ keyPath: String, kind: APIStepKind) -> JSONTemplate.Node? {
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
}
