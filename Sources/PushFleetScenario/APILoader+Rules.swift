import PushFleetCore
import Yams

extension APILoader {
    func readStatuses(_ node: Node, _ keyPath: String) -> StatusSet? {
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

    func readRules(_ node: Node, _ keyPath: String, step: APIStepKind?) -> [StatusRule] {
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
}
