import PushFleetCore
import Yams

/// Walks a YAML node tree, converting values and collecting every problem with its position.
final class NodeReader {
    let file: String
    private(set) var issues: [ScenarioIssue] = []
    /// What loads and runs but may not mean what it says; never a reason to refuse the file.
    private(set) var warnings: [ScenarioWarning] = []

    init(file: String) {
        self.file = file
    }

    func report(_ node: Node?, _ path: String, _ message: String, suggestion: String? = nil) {
        issues.append(
            ScenarioIssue(
                file: file, line: node?.mark?.line ?? 1, column: node?.mark?.column ?? 1, path: path, message: message,
                suggestion: suggestion
            )
        )
    }

    func warn(_ node: Node?, _ path: String, _ message: String, hint: String? = nil) {
        warnings.append(
            ScenarioWarning(file: file, line: node?.mark?.line ?? 1, column: node?.mark?.column ?? 1, path: path, message: message, hint: hint)
        )
    }

    /// The mapping's entries by key; unknown keys are reported with the nearest known one.
    func mapping(_ node: Node, _ path: String, allowed: [String]) -> [String: Node]? {
        guard case .mapping(let mapping) = node else {
            report(node, path, "expected a mapping with keys \(allowed.joined(separator: ", "))")
            return nil
        }
        var result: [String: Node] = [:]
        for (keyNode, value) in mapping {
            guard let key = keyNode.string else {
                report(keyNode, path, "keys must be strings")
                continue
            }
            let keyPath = path.isEmpty ? key : "\(path).\(key)"
            guard allowed.contains(key) else {
                report(keyNode, keyPath, "unknown key '\(key)'", suggestion: closest(to: key, in: allowed))
                continue
            }
            result[key] = value
        }
        return result
    }

    func sequence(_ node: Node, _ path: String, _ expected: String) -> [Node]? {
        guard case .sequence(let sequence) = node else {
            report(node, path, "expected a list of \(expected)")
            return nil
        }
        return Array(sequence)
    }

    func string(_ node: Node, _ path: String) -> String? {
        guard case .scalar(let scalar) = node else {
            report(node, path, "expected a text value")
            return nil
        }
        return scalar.string
    }

    func int(_ node: Node, _ path: String, in range: ClosedRange<Int>) -> Int? {
        guard case .scalar = node, let value = node.int else {
            report(node, path, "expected a whole number")
            return nil
        }
        guard range.contains(value) else {
            report(node, path, "must be between \(range.lowerBound) and \(range.upperBound), got \(value)")
            return nil
        }
        return value
    }

    func number(_ node: Node, _ path: String, in range: ClosedRange<Double>) -> Double? {
        guard case .scalar = node, let value = node.float ?? node.int.map(Double.init) else {
            report(node, path, "expected a number")
            return nil
        }
        guard range.contains(value) else {
            report(node, path, "must be between \(range.lowerBound) and \(range.upperBound), got \(value)")
            return nil
        }
        return value
    }

    /// A share in 0...1, written as a fraction (`0.05`) or a percentage (`5%`).
    func ratio(_ node: Node, _ path: String) -> Double? {
        if let text = node.string, text.hasSuffix("%") {
            guard let percent = Double(text.dropLast().trimmingCharacters(in: .whitespaces)), (0...100).contains(percent) else {
                report(node, path, "'\(text)' is not a percentage between 0% and 100%")
                return nil
            }
            return percent / 100
        }
        return number(node, path, in: 0...1)
    }

    func bool(_ node: Node, _ path: String) -> Bool? {
        guard case .scalar = node, let value = node.bool else {
            report(node, path, "expected true or false")
            return nil
        }
        return value
    }

    func duration(_ node: Node, _ path: String, allowZero: Bool = false) -> Duration? {
        guard let text = string(node, path) else { return nil }
        do {
            let value = try DurationText.parse(text)
            if !allowZero && value == .zero {
                report(node, path, "must be longer than 0")
                return nil
            }
            return value
        } catch {
            report(node, path, error.description)
            return nil
        }
    }

    func rate(_ node: Node, _ path: String) -> Rate? {
        guard let text = string(node, path) else { return nil }
        do {
            return try Rate(parsing: text)
        } catch {
            report(node, path, error.description)
            return nil
        }
    }

    func choice<T: RawRepresentable & CaseIterable>(_ node: Node, _ path: String, _ type: T.Type) -> T? where T.RawValue == String {
        guard let text = string(node, path) else { return nil }
        guard let value = T(rawValue: text) else {
            let options = T.allCases.map(\.rawValue)
            report(node, path, "'\(text)' is not one of \(options.joined(separator: ", "))", suggestion: closest(to: text, in: options))
            return nil
        }
        return value
    }
}

import Foundation
