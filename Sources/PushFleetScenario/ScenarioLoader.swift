public import PushFleetCore
import Foundation
import Yams

/// Reads a scenario file into a validated ``Scenario``, reporting every problem at once.
public enum ScenarioLoader {
    static let topKeys = [
        "name", "seed", "target", "auth", "fleet", "lifecycle", "timeouts", "traffic", "deadline", "grace", "leak_probes",
        "thresholds", "faults", "embedded", "rich_content", "quiet_period", "api",
    ]

    /// Loads and validates a scenario file.
    public static func load(path: String) throws(ScenarioIssues) -> Scenario {
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw ScenarioIssues(issues: [
                ScenarioIssue(file: path, line: 0, column: 0, path: "", message: "cannot read the file: \(error.localizedDescription)")
            ])
        }
        return try parse(text, file: path)
    }

    /// Parses and validates scenario text; `file` names it in messages.
    public static func parse(_ text: String, file: String) throws(ScenarioIssues) -> Scenario {
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
        let scenario = read(root, reader)
        if let scenario { validate(scenario, root: root, reader: reader) }
        guard reader.issues.isEmpty, let scenario else { throw ScenarioIssues(issues: reader.issues) }
        return scenario
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
        if let node = top["leak_probes"], let value = r.ratio(node, "leak_probes") { scenario.leakProbeShare = value }
        scenario.api = readAPI(top["api"], auth: top["auth"], mode: scenario.auth, r)
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
        if let node = top["embedded"], let embedded = r.mapping(node, "embedded", allowed: ["registration_ttl", "store", "hub", "tls"]) {
            if let tls = embedded["tls"] { scenario.embedded.tls = readTLS(tls, r) }
            if let ttl = embedded["registration_ttl"], let value = r.duration(ttl, "embedded.registration_ttl") {
                if Scenario.EmbeddedOptions.lifetimeRange.contains(value) {
                    scenario.embedded.registrationTTL = value
                } else {
                    r.report(ttl, "embedded.registration_ttl", "must be between 1s and 3650d")
                }
            }
            if let storeNode = embedded["store"], let text = r.string(storeNode, "embedded.store") {
                // `sqlite` alone: a fresh temporary file for the run.
                switch text == "sqlite" ? .success(.sqlite(path: "")) : StoreLocation.parse(text) {
                case .success(let store): scenario.embedded.store = store
                case .failure(let error): r.report(storeNode, "embedded.store", error.message)
                }
            }
            if let hubNode = embedded["hub"], let value = r.bool(hubNode, "embedded.hub") {
                scenario.embedded.hub = value
            }
        }
        return scenario
    }

    /// `tls: on`, or `{listen: HOST:PORT, names: [..], ca_file: PATH}`.
    private static func readTLS(_ node: Node, _ r: NodeReader) -> Scenario.EmbeddedOptions.TLS? {
        var tls = Scenario.EmbeddedOptions.TLS()
        if case .scalar = node {
            guard let on = r.bool(node, "embedded.tls") else { return nil }
            return on ? tls : nil
        }
        guard let map = r.mapping(node, "embedded.tls", allowed: ["listen", "names", "ca_file"]) else { return nil }
        if let listen = map["listen"], let text = r.string(listen, "embedded.tls.listen") {
            let parts = text.split(separator: ":")
            if parts.count < 2 || Int(parts.last ?? "").map({ !(0...65535).contains($0) }) ?? true {
                r.report(listen, "embedded.tls.listen", "expected HOST:PORT (port 0 for any free port), got '\(text)'")
            }
            tls.listen = text
        }
        if let names = map["names"], let items = r.sequence(names, "embedded.tls.names", "host names") {
            tls.names = items.enumerated().compactMap { r.string($1, "embedded.tls.names[\($0)]") }
            let problems = TLSNames.problems(tls.names)
            if !problems.isEmpty { r.report(names, "embedded.tls.names", problems.joined(separator: "; ")) }
        }
        if let file = map["ca_file"] { tls.caFile = r.string(file, "embedded.tls.ca_file") }
        return tls
    }

    private static func readTarget(_ node: Node, _ r: NodeReader) -> Scenario.Target? {
        if let text = node.string {
            guard text == "embedded" else {
                r.report(node, "target", "'\(text)' is not a target; use 'embedded' or {backend: URL, pns: URL | embedded}")
                return nil
            }
            return .embedded
        }
        guard let map = r.mapping(node, "target", allowed: ["backend", "pns", "pns_listen"]) else { return nil }
        guard let backendNode = map["backend"], let backend = r.string(backendNode, "target.backend") else {
            r.report(node, "target.backend", "required key is missing")
            return nil
        }
        guard isHTTPURL(backend) else {
            r.report(backendNode, "target.backend", "expected an http(s) URL, got '\(backend)'")
            return nil
        }
        let pns = map["pns"].flatMap { r.string($0, "target.pns") } ?? "embedded"
        if pns == "embedded" {
            let listen = map["pns_listen"].flatMap { r.string($0, "target.pns_listen") } ?? "127.0.0.1:0"
            return .external(backend: backend, pushService: .embedded(listen: listen))
        }
        guard isHTTPURL(pns) else {
            r.report(map["pns"], "target.pns", "expected an http(s) URL or 'embedded', got '\(pns)'")
            return nil
        }
        return .external(backend: backend, pushService: .url(pns))
    }

    static func isHTTPURL(_ text: String) -> Bool {
        guard let url = URL(string: text), let scheme = url.scheme, ["http", "https"].contains(scheme), url.host != nil else {
            return false
        }
        return true
    }

    private static func readFleet(_ node: Node, _ r: NodeReader) -> Scenario.Fleet? {
        let keys = ["users", "devices_per_user", "platforms", "arrival", "push_channel", "http", "connections", "departure", "credentials", "source_addresses", "reregister_every"]
        guard let map = r.mapping(node, "fleet", allowed: keys) else { return nil }
        guard let usersNode = map["users"] else {
            r.report(node, "fleet.users", "required key is missing")
            return nil
        }
        guard let users = r.int(usersNode, "fleet.users", in: 1...10_000_000) else { return nil }
        var fleet = Scenario.Fleet(users: users)
        if let node = map["devices_per_user"] {
            if let range = node.mapping {
                _ = range
                if let bounds = r.mapping(node, "fleet.devices_per_user", allowed: ["min", "max"]),
                    let low = bounds["min"].flatMap({ r.int($0, "fleet.devices_per_user.min", in: 0...100) }),
                    let high = bounds["max"].flatMap({ r.int($0, "fleet.devices_per_user.max", in: 1...100) })
                {
                    if low > high {
                        r.report(node, "fleet.devices_per_user", "min (\(low)) must not exceed max (\(high))")
                    } else {
                        fleet.devicesPerUser = .uniform(min: low, max: high)
                    }
                } else if r.issues.isEmpty {
                    r.report(node, "fleet.devices_per_user", "expected a number or {min: N, max: M}")
                }
            } else if let count = r.int(node, "fleet.devices_per_user", in: 1...100) {
                fleet.devicesPerUser = .fixed(count)
            }
        }
        // Both factors are bounded above, so the product fits.
        let devices = users * fleet.devicesPerUser.maximum
        if devices > Scenario.Fleet.maximumDevices {
            r.report(
                map["devices_per_user"] ?? usersNode, map["devices_per_user"] == nil ? "fleet.users" : "fleet.devices_per_user",
                "a fleet may have at most \(Scenario.Fleet.maximumDevices) devices (users × devices per user), got up to \(devices)"
            )
        }
        if let node = map["platforms"],
            let weights = r.mapping(node, "fleet.platforms", allowed: Scenario.PlatformName.allCases.map(\.rawValue))
        {
            var parsed: [Scenario.PlatformName: Double] = [:]
            for (key, value) in weights {
                if let weight = r.number(value, "fleet.platforms.\(key)", in: 0...1_000_000) {
                    parsed[Scenario.PlatformName(rawValue: key)!] = weight
                }
            }
            if parsed.values.reduce(0, +) <= 0 {
                r.report(node, "fleet.platforms", "at least one platform needs a weight above 0")
            } else {
                fleet.platforms = parsed.filter { $0.value > 0 }
            }
        }
        if let node = map["arrival"] { fleet.arrival = readProfile(node, "fleet.arrival", r, requireDuration: false) }
        if let node = map["push_channel"], let value = r.choice(node, "fleet.push_channel", Scenario.PushChannel.self) {
            fleet.pushChannel = value
        }
        if let node = map["http"], let value = r.choice(node, "fleet.http", Scenario.HTTPMode.self) { fleet.http = value }
        if let node = map["connections"], let value = r.int(node, "fleet.connections", in: 1...20_000) { fleet.connections = value }
        if let node = map["credentials"], let path = r.string(node, "fleet.credentials") {
            fleet.names = readCredentials(path, node: node, users: users, r)
        }
        if let node = map["source_addresses"], let items = r.sequence(node, "fleet.source_addresses", "local IP addresses") {
            for (index, item) in items.enumerated() {
                guard let text = r.string(item, "fleet.source_addresses[\(index)]") else { continue }
                if isIPAddress(text) {
                    fleet.sourceAddresses.append(text)
                } else {
                    r.report(item, "fleet.source_addresses[\(index)]", "'\(text)' is not an IPv4 or IPv6 address")
                }
            }
        }
        if let node = map["reregister_every"], let every = r.duration(node, "fleet.reregister_every") {
            if every < .milliseconds(100) || every > .seconds(86_400) {
                r.report(node, "fleet.reregister_every", "must be between 100ms and 24h")
            } else {
                fleet.reregisterEvery = every
            }
        }
        if let node = map["departure"], let departure = r.mapping(node, "fleet.departure", allowed: ["share", "at"]) {
            if let share = departure["share"].flatMap({ r.ratio($0, "fleet.departure.share") }),
                let at = departure["at"].flatMap({ r.duration($0, "fleet.departure.at", allowZero: true) })
            {
                fleet.departure = .init(share: share, at: at)
            } else if departure["share"] == nil || departure["at"] == nil {
                r.report(node, "fleet.departure", "needs both share and at")
            }
        }
        return fleet
    }

    private static func isIPAddress(_ text: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, text, &v4) == 1 || inet_pton(AF_INET6, text, &v6) == 1
    }

    /// A credentials file: `user:password` lines (blank lines and `#` comments ignored), at least
    /// one per fleet user. A relative path is taken from the scenario file's folder.
    private static func readCredentials(_ path: String, node: Node, users: Int, _ r: NodeReader) -> FleetNames {
        let resolved = path.hasPrefix("/") ? path : ((r.file as NSString).deletingLastPathComponent as NSString).appendingPathComponent(path)
        guard let text = try? String(contentsOfFile: resolved, encoding: .utf8) else {
            r.report(node, "fleet.credentials", "cannot read '\(resolved)'")
            return FleetNames()
        }
        var credentials: [FleetNames.Credential] = []
        // Windows line ends and a byte-order mark are not part of any name or password.
        let body = text.hasPrefix("\u{FEFF}") ? String(text.dropFirst()) : text
        for (number, raw) in body.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline).enumerated() {
            let line = raw.trimmingCharacters(in: .whitespacesAndNewlines)
            if line.isEmpty || line.hasPrefix("#") { continue }
            guard let colon = line.firstIndex(of: ":"), colon != line.startIndex else {
                r.report(node, "fleet.credentials", "\(resolved) line \(number + 1): expected user:password")
                return FleetNames()
            }
            credentials.append(.init(user: String(line[..<colon]), password: String(line[line.index(after: colon)...])))
        }
        if credentials.count < users {
            r.report(node, "fleet.credentials", "\(resolved) has \(credentials.count) users; the fleet needs \(users)")
        }
        if Set(credentials.map(\.user)).count != credentials.count {
            r.report(node, "fleet.credentials", "\(resolved) names a user twice")
        }
        return FleetNames(credentials: credentials)
    }

    /// `{rate: R, duration: D}` (constant), or `{start_rate: R, stages: [{duration: D, target: R}]}`.
    private static func readProfile(_ node: Node, _ path: String, _ r: NodeReader, requireDuration: Bool) -> LoadProfile? {
        guard let map = r.mapping(node, path, allowed: ["rate", "duration", "start_rate", "stages"]) else { return nil }
        return readProfile(map, node, path, r, requireDuration: requireDuration)
    }

    static func readProfile(_ map: [String: Node], _ node: Node, _ path: String, _ r: NodeReader, requireDuration: Bool) -> LoadProfile? {
        if let stagesNode = map["stages"] {
            if map["rate"] != nil {
                r.report(map["rate"], "\(path).rate", "give either rate or stages, not both")
            }
            let start = map["start_rate"].flatMap { r.rate($0, "\(path).start_rate") } ?? Rate(perSecond: 0)
            guard let items = r.sequence(stagesNode, "\(path).stages", "{duration, target} stages") else { return nil }
            var stages: [Stage] = []
            for (index, item) in items.enumerated() {
                let stagePath = "\(path).stages[\(index)]"
                guard let stage = r.mapping(item, stagePath, allowed: ["duration", "target"]) else { continue }
                guard let durationNode = stage["duration"], let targetNode = stage["target"] else {
                    r.report(item, stagePath, "each stage needs duration and target")
                    continue
                }
                if let duration = r.duration(durationNode, "\(stagePath).duration"), let target = r.rate(targetNode, "\(stagePath).target") {
                    stages.append(Stage(duration: duration, target: target))
                }
            }
            guard !stages.isEmpty else {
                r.report(stagesNode, "\(path).stages", "needs at least one stage")
                return nil
            }
            return LoadProfile(startRate: start, stages: stages)
        }
        guard let rateNode = map["rate"] else {
            r.report(node, "\(path).rate", "required: a rate (e.g. 100/s), or stages")
            return nil
        }
        guard let rate = r.rate(rateNode, "\(path).rate") else { return nil }
        if rate.perSecond <= 0 {
            r.report(rateNode, "\(path).rate", "must be above 0")
            return nil
        }
        if let durationNode = map["duration"] {
            guard let duration = r.duration(durationNode, "\(path).duration") else { return nil }
            return .constant(rate, for: duration)
        }
        if requireDuration {
            r.report(node, "\(path).duration", "required with a constant rate")
            return nil
        }
        // Arrivals without a duration go on at this rate until the whole fleet is in.
        return .constant(rate, for: .seconds(0))
    }

    private static func readTimeouts(_ node: Node, _ r: NodeReader, into timeouts: inout Scenario.Timeouts) {
        guard let map = r.mapping(node, "timeouts", allowed: ["login", "register", "connect", "send", "fetch"]) else { return }
        if let v = map["login"].flatMap({ r.duration($0, "timeouts.login") }) { timeouts.login = v }
        if let v = map["register"].flatMap({ r.duration($0, "timeouts.register") }) { timeouts.register = v }
        if let v = map["connect"].flatMap({ r.duration($0, "timeouts.connect") }) { timeouts.connect = v }
        if let v = map["send"].flatMap({ r.duration($0, "timeouts.send") }) { timeouts.send = v }
        if let v = map["fetch"].flatMap({ r.duration($0, "timeouts.fetch") }) { timeouts.fetch = v }
    }

    private static func readTraffic(_ node: Node, _ path: String, index: Int, _ r: NodeReader) -> Scenario.Traffic? {
        let keys = ["name", "kind", "from", "to", "platforms", "rate", "duration", "start_rate", "stages", "start", "max_in_flight"]
        guard let map = r.mapping(node, path, allowed: keys) else { return nil }
        guard let kindNode = map["kind"] else {
            r.report(node, "\(path).kind", "required: plain, secure or rich")
            return nil
        }
        let kind = r.choice(kindNode, "\(path).kind", Scenario.Traffic.Kind.self)
        let profileMap = map.filter { ["rate", "duration", "start_rate", "stages"].contains($0.key) }
        let profile = readProfile(profileMap, node, path, r, requireDuration: true)
        guard let kind, let profile else { return nil }
        guard profile.expectedCount <= Double(Scenario.Traffic.maximumSends) else {
            r.report(node, path, "plans about \(String(format: "%.3g", profile.expectedCount)) sends; a sender may plan at most \(Scenario.Traffic.maximumSends) (rate × duration)")
            return nil
        }
        var traffic = Scenario.Traffic(name: map["name"].flatMap { r.string($0, "\(path).name") } ?? "\(kind.rawValue)-\(index + 1)", kind: kind, profile: profile)
        if let from = map["from"] { traffic.from = readParty(from, "\(path).from", r, allowSelf: false) ?? .randomUser }
        if let to = map["to"] { traffic.to = readParty(to, "\(path).to", r, allowSelf: true) ?? .randomUser }
        if let node = map["platforms"], let items = r.sequence(node, "\(path).platforms", "platforms") {
            traffic.platforms = items.enumerated().compactMap { r.choice($1, "\(path).platforms[\($0)]", Scenario.PlatformName.self) }
            if traffic.platforms.isEmpty { r.report(node, "\(path).platforms", "needs at least one platform") }
        }
        if let node = map["start"], let value = r.duration(node, "\(path).start", allowZero: true) { traffic.start = value }
        if let node = map["max_in_flight"], let value = r.int(node, "\(path).max_in_flight", in: 1...1_000_000) {
            traffic.maxInFlight = value
        }
        return traffic
    }

    private static func readParty(_ node: Node, _ path: String, _ r: NodeReader, allowSelf: Bool) -> Scenario.Traffic.Party? {
        if let text = node.string {
            switch text {
            case "random_user": return .randomUser
            case "self" where allowSelf: return .selfUser
            default:
                let options = allowSelf ? ["random_user", "self"] : ["random_user"]
                r.report(node, path, "'\(text)' is not one of \(options.joined(separator: ", ")), {user: NAME} or {group: [NAMES]}",
                    suggestion: closest(to: text, in: options))
                return nil
            }
        }
        guard let map = r.mapping(node, path, allowed: ["user", "group"]) else { return nil }
        if let user = map["user"] { return r.string(user, "\(path).user").map { .user($0) } }
        if let group = map["group"], let items = r.sequence(group, "\(path).group", "user names") {
            let names = items.enumerated().compactMap { r.string($1, "\(path).group[\($0)]") }
            guard !names.isEmpty else {
                r.report(group, "\(path).group", "needs at least one user")
                return nil
            }
            return .group(names)
        }
        r.report(node, path, "expected {user: NAME} or {group: [NAMES]}")
        return nil
    }

    private static func readThresholds(_ node: Node, _ r: NodeReader, extraLatency: Set<String>) -> [Threshold] {
        guard case .mapping(let mapping) = node else {
            r.report(node, "thresholds", "expected a mapping of metric name to expressions")
            return []
        }
        var thresholds: [Threshold] = []
        for (keyNode, value) in mapping {
            guard let metric = keyNode.string else { continue }
            let path = "thresholds.\(metric)"
            let base = metric.hasSuffix(".latency") ? String(metric.dropLast(".latency".count)) : metric
            guard let kind = MetricName.kind(of: metric) ?? (extraLatency.contains(base) ? .latency : nil) else {
                r.report(keyNode, path, "unknown metric '\(metric)'", suggestion: closest(to: metric, in: MetricName.all + extraLatency.sorted()))
                continue
            }
            let expressions: [Node] = value.string != nil ? [value] : (r.sequence(value, path, "expressions") ?? [])
            for expressionNode in expressions {
                guard let text = r.string(expressionNode, path) else { continue }
                do {
                    let threshold = try Threshold(metric: metric, expression: text)
                    guard kind.supports(threshold.aggregate) else {
                        r.report(expressionNode, path, "'\(threshold.aggregate)' does not apply to \(kindName(kind)) metric '\(metric)'")
                        continue
                    }
                    thresholds.append(threshold)
                } catch {
                    r.report(expressionNode, path, error.description)
                }
            }
        }
        return thresholds
    }

    private static func kindName(_ kind: MetricKind) -> String {
        switch kind {
        case .latency: "latency (use p(N), avg, min, max, med or count)"
        case .counter: "counter (use count)"
        case .ratio: "ratio (use value)"
        }
    }

    private static func readFault(_ node: Node, _ path: String, _ r: NodeReader) -> Scenario.FaultStep? {
        guard let map = r.mapping(node, path, allowed: ["at", "pns", "disconnect", "backend", "down_for", "backend_latency"]) else { return nil }
        guard let atNode = map["at"], let at = r.duration(atNode, "\(path).at", allowZero: true) else {
            if map["at"] == nil { r.report(node, "\(path).at", "required: when, from the start of traffic") }
            return nil
        }
        var step = Scenario.FaultStep(at: at)
        if let node = map["disconnect"] { step.disconnect = r.ratio(node, "\(path).disconnect") }
        if let pnsNode = map["pns"], let pns = r.mapping(pnsNode, "\(path).pns", allowed: ["drop", "throttle", "latency", "unregistered_ratio"]) {
            step.drop = pns["drop"].flatMap { r.ratio($0, "\(path).pns.drop") }
            step.throttle = pns["throttle"].flatMap { r.ratio($0, "\(path).pns.throttle") }
            step.unregisteredRatio = pns["unregistered_ratio"].flatMap { r.ratio($0, "\(path).pns.unregistered_ratio") }
            if let latency = pns["latency"] {
                step.latency = readLatency(latency, "\(path).pns.latency", r)
                if let spec = step.latency, Self.longest(spec) > .milliseconds(3_600_000) {
                    r.report(latency, "\(path).pns.latency", "an added latency may be at most 1h (mean plus stddev for normal)")
                }
            }
        }
        if let latencyNode = map["backend_latency"], let latency = r.mapping(latencyNode, "\(path).backend_latency", allowed: ["send", "fetch"]) {
            for (key, node) in latency {
                guard let spec = readLatency(node, "\(path).backend_latency.\(key)", r) else { continue }
                if Self.longest(spec) > .milliseconds(3_600_000) {
                    r.report(node, "\(path).backend_latency.\(key)", "an added latency may be at most 1h (mean plus stddev for normal)")
                    continue
                }
                if key == "send" { step.backendSendLatency = spec } else { step.backendFetchLatency = spec }
            }
            if latency.isEmpty { r.report(latencyNode, "\(path).backend_latency", "give send and/or fetch latencies") }
        }
        if let backendNode = map["backend"], let action = r.string(backendNode, "\(path).backend") {
            var down = Duration.zero
            if let downNode = map["down_for"], let value = r.duration(downNode, "\(path).down_for", allowZero: true) {
                if value > .seconds(3600) {
                    r.report(downNode, "\(path).down_for", "the backend may stay down at most 1h")
                } else {
                    down = value
                }
            }
            if action == "restart" {
                step.backend = .restart(downFor: down)
            } else {
                r.report(backendNode, "\(path).backend", "'\(action)' is not a backend fault; use restart")
            }
        } else if let downNode = map["down_for"] {
            r.report(downNode, "\(path).down_for", "down_for goes with backend: restart")
        }
        if step.disconnect == nil && step.drop == nil && step.throttle == nil && step.latency == nil && step.unregisteredRatio == nil
            && step.backend == nil && step.backendSendLatency == nil && step.backendFetchLatency == nil
        {
            // A wrong backend action or latency was reported already.
            if map["backend"] != nil || map["backend_latency"] != nil { return nil }
            r.report(node, path, "sets nothing; give pns knobs (drop, throttle, latency, unregistered_ratio), disconnect, backend: restart or backend_latency")
            return nil
        }
        return step
    }

    /// The largest latency a spec names (mean + stddev for a normal one).
    static func longest(_ spec: Scenario.LatencySpec) -> Duration {
        switch spec {
        case .none: .zero
        case .fixed(let d): d
        case .uniform(_, let high): high
        case .normal(let mean, let sd): mean + sd
        }
    }

    /// `none`, `{fixed: 20ms}`, `{uniform: [5ms, 50ms]}` or `{normal: {mean: 20ms, stddev: 5ms}}`.
    private static func readLatency(_ node: Node, _ path: String, _ r: NodeReader) -> Scenario.LatencySpec? {
        if node.string == "none" { return Scenario.LatencySpec.none }
        guard let map = r.mapping(node, path, allowed: ["fixed", "uniform", "normal"]), map.count == 1, let (kind, value) = map.first else {
            r.report(node, path, "expected none, {fixed: D}, {uniform: [MIN, MAX]} or {normal: {mean: D, stddev: D}}")
            return nil
        }
        switch kind {
        case "fixed":
            return r.duration(value, "\(path).fixed", allowZero: true).map { .fixed($0) }
        case "uniform":
            guard let items = r.sequence(value, "\(path).uniform", "two durations"), items.count == 2,
                let low = r.duration(items[0], "\(path).uniform[0]", allowZero: true),
                let high = r.duration(items[1], "\(path).uniform[1]", allowZero: true)
            else {
                r.report(value, "\(path).uniform", "expected [MIN, MAX]")
                return nil
            }
            guard low <= high else {
                r.report(value, "\(path).uniform", "MIN must not exceed MAX")
                return nil
            }
            return .uniform(min: low, max: high)
        default:
            guard let normal = r.mapping(value, "\(path).normal", allowed: ["mean", "stddev"]),
                let mean = normal["mean"].flatMap({ r.duration($0, "\(path).normal.mean", allowZero: true) }),
                let sd = normal["stddev"].flatMap({ r.duration($0, "\(path).normal.stddev", allowZero: true) })
            else {
                r.report(value, "\(path).normal", "expected {mean: D, stddev: D}")
                return nil
            }
            return .normal(mean: mean, stddev: sd)
        }
    }

    // MARK: Cross-checks

    private static func validate(_ scenario: Scenario, root: Node, reader r: NodeReader) {
        let top = root.mapping
        func node(_ key: String) -> Node? { top?[Node(key)] }
        let steps = scenario.lifecycle
        func require(_ step: Scenario.LifecycleStep, for other: Scenario.LifecycleStep) {
            if steps.contains(other) && !steps.contains(step) {
                r.report(node("lifecycle"), "lifecycle", "'\(other.rawValue)' needs '\(step.rawValue)'")
            }
        }
        require(.register, for: .connect)
        require(.connect, for: .receive)
        require(.receive, for: .fetchSecure)
        require(.receive, for: .fetchRich)
        var names = Set<String>()
        for (index, traffic) in scenario.traffic.enumerated() {
            let path = "traffic[\(index)]"
            let item = node("traffic")?.sequence?[index]
            if !names.insert(traffic.name).inserted { r.report(item, "\(path).name", "duplicate sender name '\(traffic.name)'") }
            if traffic.kind == .secure && !steps.contains(.fetchSecure) {
                r.report(item, "\(path).kind", "secure sends carry only an id; add fetch_secure to lifecycle to attribute them")
            }
            if !steps.contains(.receive) {
                r.report(item, path, "traffic needs devices that receive; add connect and receive to lifecycle")
            }
            for party in [traffic.from, traffic.to] {
                let users: [String]
                switch party {
                case .user(let name): users = [name]
                case .group(let group): users = group
                default: users = []
                }
                for user in users where scenario.fleet.names.userIndex(user, users: scenario.fleet.users) == nil {
                    r.report(item, path, "no user '\(user)' in a fleet of \(scenario.fleet.users) (users are \(scenario.fleet.names.user(0))…\(scenario.fleet.names.user(scenario.fleet.users - 1)))")
                }
            }
        }
        if case .external(_, .url(let pns)) = scenario.target, pns.hasPrefix("https:"), scenario.fleet.pushChannel == .perDevice,
            scenario.lifecycle.contains(.connect)
        {
            r.report(node("target"), "target.pns", "devices' own sockets speak plain ws://; give an http:// push service or use push_channel: multiplexed")
        }
        let pushFaults = scenario.faults.contains { $0.drop != nil || $0.throttle != nil || $0.latency != nil || $0.unregisteredRatio != nil || $0.disconnect != nil }
        if pushFaults, case .external(_, .url) = scenario.target {
            r.report(node("faults"), "faults", "faults need the embedded push service (or one with its /admin API); the target's pns is external")
        }
        if scenario.faults.contains(where: { $0.backend != nil || $0.backendSendLatency != nil || $0.backendFetchLatency != nil }),
            scenario.target != .embedded
        {
            r.report(node("faults"), "faults", "backend: restart and backend_latency need the embedded backend (target: embedded)")
        }
        if scenario.embedded.hub, scenario.target != .embedded {
            r.report(node("embedded"), "embedded.hub", "the hub is the embedded backend's way to send; the target is an external backend")
        }
        validateAPI(scenario, node: node, r)
        if scenario.embedded.tls != nil, case .external(_, .url) = scenario.target {
            r.report(node("embedded"), "embedded.tls", "TLS is the embedded push service's; the target's pns is external")
        }
        if scenario.embedded.store != .memory, scenario.target != .embedded {
            r.report(node("embedded"), "embedded.store", "the store is the embedded backend's; the target is an external backend")
        }
    }
}

