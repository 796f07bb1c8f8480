public import PushFleetCore
import Foundation
import Yams

/// Reads a scenario file into a validated ``Scenario``, reporting every problem at once.
public enum ScenarioLoader {
    static let topKeys = [
        "name", "seed", "target", "auth", "fleet", "lifecycle", "timeouts", "traffic", "deadline", "grace", "leak_probes",
        "horizon", "thresholds", "faults", "network", "embedded", "rich_content", "quiet_period", "api", "capacity",
        "tracing",
    ]

    /// Loads and validates a scenario file.
    public static func load(path: String) throws(ScenarioIssues) -> Scenario {
        try parse(text(ofFile: path), file: path)
    }

    /// A scenario file's text, or the issue saying why it cannot be read.
    public static func text(ofFile path: String) throws(ScenarioIssues) -> String {
        do {
            return try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw ScenarioIssues(issues: [
                ScenarioIssue(file: path, line: 0, column: 0, path: "", message: "cannot read the file: \(error.localizedDescription)")
            ])
        }
    }

    /// Parses and validates scenario text; `file` names it in messages. `overrides` replace what
    /// the text says before the cross-checks run. Warnings are left out (``load(text:file:overrides:)``
    /// has them).
    public static func parse(_ text: String, file: String, overrides: ScenarioOverrides = .init()) throws(ScenarioIssues) -> Scenario {
        try load(text: text, file: file, overrides: overrides).scenario
    }

    /// A valid scenario and what its file may not mean as written (``ScenarioWarning``).
    public struct Loaded: Sendable {
        public var scenario: Scenario
        public var warnings: [ScenarioWarning]
    }

    /// Parses and validates scenario text as ``parse(_:file:overrides:)`` does, keeping the
    /// warnings: what loads and runs but may not mean what it says.
    public static func load(text: String, file: String, overrides: ScenarioOverrides = .init()) throws(ScenarioIssues) -> Loaded {
        if let (line, column) = aliasPastLimit(text) {
            throw ScenarioIssues(issues: [
                ScenarioIssue(
                    file: file, line: line, column: column, path: "",
                    message: "more than \(maximumAliases) YAML aliases (*name); a scenario file needs few"
                )
            ])
        }
        let root: Node
        do {
            guard let node = try Yams.compose(yaml: text) else {
                throw ScenarioIssues(issues: [ScenarioIssue(file: file, line: 1, column: 1, path: "", message: "the file is empty")])
            }
            root = node
        } catch let issues as ScenarioIssues {
            throw issues
        } catch let error as YamlError {
            throw ScenarioIssues(issues: [yamlIssue(error, file: file)])
        } catch {
            throw ScenarioIssues(issues: [ScenarioIssue(file: file, line: 1, column: 1, path: "", message: "\(error)")])
        }
        let reader = NodeReader(file: file)
        let read = read(root, reader)
        if let read, let only = overrides.onlyFault, !read.network.faults.indices.contains(only - 1) {
            let count = read.network.faults.count
            reader.report(
                root.mapping?[Node("network")], "network.faults",
                count == 0 ? "--only-fault \(only): this scenario has no network faults" : "--only-fault \(only): give 1 to \(count), the place of a fault in network.faults"
            )
        }
        let scenario = read.map(overrides.applied(to:))
        if let scenario { validate(scenario, root: root, reader: reader, overrides: overrides) }
        guard reader.issues.isEmpty, let scenario else { throw ScenarioIssues(issues: reader.issues) }
        return Loaded(scenario: scenario, warnings: reader.warnings)
    }

    /// An alias copies its anchored node where it stands, and nested aliases multiply: a few lines
    /// can stand for a tree of billions of nodes, which the YAML composer hashes in full when one
    /// is a mapping key. With at most this many aliases a tree is at most a few hundred times its
    /// text (3 to the power of a third of them).
    static let maximumAliases = 16

    /// Where the first alias past ``maximumAliases`` starts (line and column from 1), counting every
    /// `*` followed by a character an anchor name may hold: comments and quoted text included, so
    /// never fewer than the composer would expand.
    static func aliasPastLimit(_ text: String) -> (line: Int, column: Int)? {
        var count = 0
        var line = 1
        var column = 1
        var previousWasStar = false
        for scalar in text.unicodeScalars {
            // YAML 1.2 anchor names take any character but spaces and flow indicators.
            if previousWasStar, !scalar.properties.isWhitespace, !",[]{}".unicodeScalars.contains(scalar) {
                count += 1
                if count > maximumAliases { return (line, column - 1) }
            }
            previousWasStar = scalar == "*"
            if scalar == "\n" {
                line += 1
                column = 1
            } else {
                column += 1
            }
        }
        return nil
    }

    private static func yamlIssue(_ error: YamlError, file: String) -> ScenarioIssue {
        switch error {
        case .scanner(_, let problem, let mark, _), .parser(_, let problem, let mark, _), .composer(_, let problem, let mark, _):
            return ScenarioIssue(file: file, line: mark.line, column: mark.column, path: "", message: "YAML syntax: \(problem)")
        case .duplicatedKeysInMapping(let duplicates, _):
            return ScenarioIssue(file: file, line: 1, column: 1, path: "", message: "duplicated keys: \(duplicates.joined(separator: ", "))")
        default:
            return ScenarioIssue(file: file, line: 1, column: 1, path: "", message: "YAML: \(error)")
        }
    }

    // MARK: Reading

    private static func read(_ root: Node, _ r: NodeReader) -> Scenario? {
        guard let top = r.mapping(root, "", allowed: topKeys) else { return nil }
        var name: String?
        if let node = top["name"] {
            name = r.string(node, "name")
            if let value = name, value.isEmpty || !value.allSatisfy({ $0.isLetter || $0.isNumber || "-_.".contains($0) }) {
                r.report(node, "name", "use letters, digits, '-', '_' and '.' only (it names the report folder)")
            }
        } else {
            r.report(root, "name", "required key is missing")
        }
        guard let fleetNode = top["fleet"] else {
            r.report(root, "fleet", "required key is missing")
            return nil
        }
        guard let fleet = readFleet(fleetNode, r) else { return nil }
        var scenario = Scenario(name: name ?? "unnamed", fleet: fleet)
        if let node = top["seed"], let seed = r.int(node, "seed", in: 0...Int.max) { scenario.seed = UInt64(seed) }
        if let node = top["target"], let target = readTarget(node, r) { scenario.target = target }
        if let node = top["auth"], let auth = r.choice(node, "auth", Scenario.AuthMode.self) { scenario.auth = auth }
        if let node = top["lifecycle"], let steps = r.sequence(node, "lifecycle", "steps") {
            scenario.lifecycle = Set(steps.enumerated().compactMap { r.choice($1, "lifecycle[\($0)]", Scenario.LifecycleStep.self) })
        }
        if let node = top["timeouts"] { readTimeouts(node, r, into: &scenario.timeouts) }
        if let node = top["traffic"], let items = r.sequence(node, "traffic", "senders") {
            scenario.traffic = items.enumerated().compactMap { readTraffic($1, "traffic[\($0)]", index: $0, r) }
        }
        if let node = top["deadline"], let value = r.duration(node, "deadline") { scenario.deadline = value }
        if let node = top["grace"], let value = r.duration(node, "grace", allowZero: true) { scenario.grace = value }
        if let node = top["horizon"], let value = r.duration(node, "horizon") {
            if value <= scenario.deadline || value > .seconds(7 * 86_400) {
                r.report(node, "horizon", "must be longer than the deadline (\(DurationText.format(scenario.deadline))) and at most 7d")
            } else {
                scenario.horizon = value
            }
        }
        if let node = top["leak_probes"], let value = r.ratio(node, "leak_probes") { scenario.leakProbeShare = value }
        scenario.api = readAPI(top["api"], auth: top["auth"], mode: scenario.auth, fleetPlatforms: fleet.platforms.keys.sorted(), r)
        if let node = top["thresholds"] {
            scenario.thresholds = readThresholds(node, r, extraLatency: Set(scenario.api?.metricNames ?? []))
            scenario.thresholdMetrics = Set(node.mapping?.keys.compactMap(\.string) ?? [])
        }
        if let node = top["rich_content"], let value = r.choice(node, "rich_content", Scenario.RichContentCheck.self) {
            scenario.richContent = value
        }
        if let node = top["quiet_period"], let value = r.duration(node, "quiet_period", allowZero: true) {
            scenario.quietPeriod = value
        }
        if let node = top["faults"], let items = r.sequence(node, "faults", "fault steps") {
            scenario.faults = items.enumerated().compactMap { readFault($1, "faults[\($0)]", r) }
        }
        if let node = top["network"], let network = readNetwork(node, r) { scenario.network = network }
        if let node = top["embedded"] { readEmbedded(node, r, into: &scenario.embedded) }
        if let node = top["capacity"] { scenario.capacity = readCapacity(node, r) }
        if let node = top["tracing"], let map = r.mapping(node, "tracing", allowed: ["propagate", "sample"]) {
            if let value = map["propagate"], let propagate = r.bool(value, "tracing.propagate") { scenario.tracing.propagate = propagate }
            if let value = map["sample"], let share = r.ratio(value, "tracing.sample") { scenario.tracing.sample = share }
        }
        return scenario
    }
}
