import PushFleetCore
import Yams

extension APILoader {
    /// A value a step keeps is used if a template, a rule's `forget`, a `skip_when_known` or the
    /// ledger (a send's content id) refers to it.
    private struct Use: Hashable {
        /// The step that owns a local value; nil for the user's and the device's.
        var owner: APIStepKind?
        var ref: VariableRef
    }

    /// Warns, at each `extract` entry, about a value nothing uses — usually a name that was meant
    /// to mean something to pushfleet (a send's `id` of its stored content) — and about a send's
    /// `extract: {id: …}` read as the content id, which `content_id:` now says.
    func warnAboutExtractions(_ steps: [APIStep]) {
        var used = Set<Use>()
        for step in steps {
            for request in step.allRequests {
                let refs = request.variables + request.skipWhenKnown + request.rules.flatMap(\.forget)
                for ref in refs { used.insert(Self.use(ref, in: step.kind)) }
            }
            if let slot = step.contentID { used.insert(Use(owner: step.kind, ref: .stored(.local, slot: slot))) }
        }
        let contentSteps = Dictionary(steps.filter { $0.contentID != nil }.map { ($0.kind, $0.contentID!) }, uniquingKeysWith: { a, _ in a })
        var warned = Set<String>()
        for site in extractionSites {
            guard let ref = reference(of: site.name, in: site.kind), warned.insert(site.path).inserted else { continue }
            if Self.storesContent(site.kind), site.name == "id", contentSlots[site.kind] == nil, case .stored(.local, let slot) = ref,
                contentSteps[site.kind] == slot
            {
                r.warn(
                    site.key, site.path, "an extraction named id in \(site.kind) is read as the stored content's id",
                    hint: "say so with content_id: \(Self.flow(site.location)) in its place"
                )
                continue
            }
            guard !used.contains(Self.use(ref, in: site.kind)) else { continue }
            let hint =
                Self.storesContent(site.kind)
                ? "if this is the stored content's id, write content_id: \(Self.flow(site.location)) in its place"
                : "use it as {{\(site.name)}} in a later request, or leave it out"
            r.warn(site.key, site.path, "'\(site.name)' is extracted but no template, rule, skip_when_known or content refers to it", hint: hint)
        }
    }

    private static func use(_ ref: VariableRef, in kind: APIStepKind) -> Use {
        if case .stored(.local, _) = ref { return Use(owner: kind, ref: ref) }
        return Use(owner: nil, ref: ref)
    }

    /// Where an extracted name's value lives.
    private func reference(of name: String, in kind: APIStepKind) -> VariableRef? {
        if let slot = locals[kind]?.firstIndex(of: name) { return .stored(.local, slot: slot) }
        guard let entry = stored[name], entry.step == kind else { return nil }
        return .stored(entry.scope, slot: entry.slot)
    }

    /// A YAML node written back in flow style, for a hint to copy: `{ json: [/id, /Id], optional: true }`.
    static func flow(_ node: Node) -> String {
        switch node {
        case .scalar(let scalar):
            let text = scalar.string
            let plain =
                !text.isEmpty && scalar.style == .plain && text.first != " " && text.last != " "
                && !text.contains(where: { ":{}[],#&*!|>'\"%@`".contains($0) })
            guard !plain else { return text }
            var quoted = "\""
            for character in text {
                if character == "\\" || character == "\"" { quoted.append("\\") }
                quoted.append(character)
            }
            return quoted + "\""
        case .sequence(let items): return "[" + items.map(flow).joined(separator: ", ") + "]"
        case .mapping(let map): return "{ " + map.map { "\(flow($0.key)): \(flow($0.value))" }.joined(separator: ", ") + " }"
        default: return "…"
        }
    }
}
