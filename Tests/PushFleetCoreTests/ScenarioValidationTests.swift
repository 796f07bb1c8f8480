import Foundation
import PushFleetCore
import PushFleetScenario
import Testing

/// One test per class of scenario error, with the message text asserted.
@Suite("Scenario validation")
struct ScenarioValidationTests {
    static let valid = """
        name: ok
        fleet:
          users: 10
        lifecycle: [login, register, connect, receive, fetch_secure]
        traffic:
          - { kind: secure, rate: 10/s, duration: 1s }
        """

    static func issuesOf(_ yaml: String, file: String) -> [ScenarioIssue] {
        do {
            _ = try ScenarioLoader.parse(yaml, file: file)
            return []
        } catch {
            return error.issues
        }
    }

    func issues(_ yaml: String) -> [ScenarioIssue] {
        do {
            _ = try ScenarioLoader.parse(yaml, file: "test.yaml")
            return []
        } catch {
            return error.issues
        }
    }

    func only(_ yaml: String) throws -> String {
        let found = issues(yaml)
        try #require(found.count == 1, "\(found)")
        return found[0].description
    }

    @Test("a valid file loads with defaults filled in")
    func valid() throws {
        let scenario = try ScenarioLoader.parse(Self.valid, file: "ok.yaml")
        #expect(scenario.fleet.devicesPerUser == .fixed(1))
        #expect(scenario.deadline == .seconds(5) && scenario.auth == .basic && scenario.target == .embedded)
        #expect(scenario.traffic[0].profile == .constant(Rate(perSecond: 10), for: .seconds(1)))
    }

    @Test("the default gate judges every metric the scenario does not name; naming one, even with no rules, replaces it")
    func defaultGate() throws {
        let plain = try ScenarioLoader.parse(Self.valid, file: "ok.yaml")
        #expect(plain.effectiveThresholds.count == DefaultGate.rules.count)
        #expect(Set(plain.effectiveThresholds.map(\.metric)).isSuperset(of: [
            "delivery.misdelivered", "leaks", "delivery.duplicates", "delivery.stale", "delivery.unverified", "delivery.sent_to_dead_token",
            "sends.failed_ratio", "sends.dropped_ratio", "devices.failed_ratio",
        ]))
        let relaxed = try ScenarioLoader.parse(
            Self.valid + "\nthresholds:\n  delivery.duplicates: []\n  delivery.lost_ratio: [\"value < 0.05\"]\nrich_content: echo\nquiet_period: 0s",
            file: "ok.yaml"
        )
        let metrics = relaxed.effectiveThresholds.map(\.metric)
        #expect(!metrics.contains("delivery.duplicates"))
        #expect(metrics.filter { $0 == "delivery.lost_ratio" }.count == 1)
        #expect(relaxed.effectiveThresholds.first { $0.metric == "delivery.lost_ratio" }?.expression == "value < 0.05")
        #expect(relaxed.richContent == .echo && relaxed.quietPeriod == .zero)
        #expect(try only(Self.valid + "\nrich_content: bytes").contains("rich_content"))
    }

    @Test("the horizon is read, and refused when it is not past the deadline or over a week")
    func horizon() throws {
        #expect(try ScenarioLoader.parse(Self.valid, file: "ok.yaml").horizon == .seconds(600))
        #expect(try ScenarioLoader.parse(Self.valid + "\nhorizon: 90s", file: "ok.yaml").horizon == .seconds(90))
        #expect(try only(Self.valid + "\ndeadline: 10s\nhorizon: 10s").contains("horizon: must be longer than the deadline (10s)"))
        #expect(try only(Self.valid + "\nhorizon: 8d").contains("horizon"))
        #expect(try only(Self.valid + "\nhorizon: 0s").contains("horizon"))
        #expect(try only(Self.valid + "\nhorizon: soon").contains("horizon"))
    }

    @Test("a fault latency past an hour is refused where it is written")
    func faultLatencyBound() throws {
        let yaml = Self.valid + "\nfaults:\n  - { at: 1s, pns: { latency: { normal: { mean: 2000000h, stddev: 1000000h } } } }"
        #expect(try only(yaml).contains("faults[0].pns.latency: an added latency may be at most 1h"))
    }

    @Test("backend restarts, stores and renewals: read, and refused where they cannot apply")
    func restartsStoresRenewals() throws {
        let yaml = Self.valid.replacingOccurrences(of: "  users: 10", with: "  users: 10\n  reregister_every: 30s") + """

            embedded: { store: "sqlite:/tmp/pf.db" }
            faults:
              - { at: 2s, backend: restart, down_for: 500ms }
              - { at: 4s, backend: restart }
              - { at: 5s, backend_latency: { fetch: { fixed: 300ms }, send: none } }
            """
        let scenario = try ScenarioLoader.parse(yaml, file: "ok.yaml")
        #expect(scenario.faults.map(\.backend) == [.restart(downFor: .milliseconds(500)), .restart(downFor: .zero), nil])
        #expect(scenario.faults[2].backendFetchLatency == .fixed(.milliseconds(300)) && scenario.faults[2].backendSendLatency == Scenario.LatencySpec.none)
        #expect(try only(Self.valid + "\nfaults:\n  - { at: 1s, backend_latency: { fetch: { fixed: 2h } } }").contains("faults[0].backend_latency.fetch: an added latency may be at most 1h"))
        #expect(scenario.embedded.store == .sqlite(path: "/tmp/pf.db"))
        #expect(scenario.fleet.reregisterEvery == .seconds(30))

        #expect(try only(Self.valid + "\nfaults:\n  - { at: 1s, backend: crash }").contains("faults[0].backend: 'crash' is not a backend fault; use restart"))
        #expect(try only(Self.valid + "\nfaults:\n  - { at: 1s, backend: restart, down_for: 2h }").contains("faults[0].down_for: the backend may stay down at most 1h"))
        #expect(try only(Self.valid + "\nfaults:\n  - { at: 1s, down_for: 1s, disconnect: 10% }").contains("down_for goes with backend: restart"))
        #expect(try only(Self.valid + "\nembedded: { store: redis://x }").contains("embedded.store: 'redis://x' is not a store"))
        #expect(try only(Self.valid + "\nembedded: { store: \"sqlite:\" }").contains("sqlite: needs a file path"))
        let external = Self.valid + "\ntarget: { backend: \"http://127.0.0.1:9\", pns: embedded }\nfaults:\n  - { at: 1s, backend: restart }"
        #expect(try only(external).contains("backend: restart and backend_latency need the embedded backend"))
        let tooOften = Self.valid.replacingOccurrences(of: "  users: 10", with: "  users: 10\n  reregister_every: 10ms")
        #expect(try only(tooOften).contains("fleet.reregister_every: must be between 100ms and 24h"))
        #expect(StoreLocation.postgres(url: "postgres://pf:secret@db:5432/pf").description == "postgres://pf:***@db:5432/pf")
    }

    @Test("a credentials file with Windows line ends and a byte-order mark reads as written")
    func credentialsLineEnds() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pf-cred-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try Data("\u{FEFF}ann:pw-1\r\nben:pw-2\r\n\r\n# c\r\ncid:pw-3".utf8).write(to: directory.appendingPathComponent("users.txt"))
        let yaml = Self.valid.replacingOccurrences(of: "  users: 10", with: "  users: 3\n  credentials: users.txt")
        let scenario = try ScenarioLoader.parse(yaml, file: directory.appendingPathComponent("s.yaml").path)
        let names = scenario.fleet.names
        #expect((0..<3).map(names.user) == ["ann", "ben", "cid"])
        #expect((0..<3).map(names.password) == ["pw-1", "pw-2", "pw-3"])
    }

    @Test("a misspelled key is named with its position and a suggestion")
    func unknownKey() throws {
        let message = try only(Self.valid.replacingOccurrences(of: "  users: 10", with: "  users: 10\n  devices_per_usr: 2"))
        #expect(message == "test.yaml:4:3: fleet.devices_per_usr: unknown key 'devices_per_usr' (did you mean 'devices_per_user'?)")
    }

    @Test("tracing: its keys, a bool and a share, each refused with its place when wrong")
    func tracing() throws {
        #expect(try only(Self.valid + "\ntracing: { sample: 150% }").contains("tracing.sample: '150%' is not a percentage between 0% and 100%"))
        #expect(try only(Self.valid + "\ntracing: { propagate: sometimes }").contains("tracing.propagate"))
        #expect(try only(Self.valid + "\ntracing: { sampel: 1% }").contains("unknown key 'sampel'"))
        #expect(try only(Self.valid + "\ntracing: on").contains("tracing"))
        let set = try ScenarioLoader.parse(Self.valid + "\ntracing: { propagate: false, sample: 5% }", file: "ok.yaml")
        #expect(set.tracing == Scenario.Tracing(propagate: false, sample: 0.05))
        #expect(try ScenarioLoader.parse(Self.valid, file: "ok.yaml").tracing == Scenario.Tracing())
    }

    @Test("abort_on_fail: a rule as a mapping, with its delay; refused where it cannot apply")
    func abortOnFail() throws {
        let rule = "\nthresholds:\n  delivery.lost: [{ threshold: \"count == 0\", abort_on_fail: true, delay_abort_eval: 10s }, \"count < 5\"]"
        let parsed = try ScenarioLoader.parse(Self.valid + rule, file: "ok.yaml")
        #expect(parsed.thresholds.map(\.abortOnFail) == [.init(delay: .seconds(10)), nil])
        #expect(parsed.thresholds.map(\.expression) == ["count == 0", "count < 5"])
        let plain = try ScenarioLoader.parse(Self.valid + "\nthresholds:\n  leaks: [{ threshold: \"count == 0\", abort_on_fail: true }]", file: "ok.yaml")
        #expect(plain.thresholds.first?.abortOnFail == .init(delay: .zero))
        func refused(_ entry: String) throws -> String { try only(Self.valid + "\nthresholds:\n  delivery.lost: [\(entry)]") }
        #expect(try refused("{ abort_on_fail: true }").contains("needs 'threshold'"))
        #expect(try refused("{ threshold: \"count == 0\", abort_on_fial: true }").contains("unknown key 'abort_on_fial'"))
        #expect(try refused("{ threshold: \"count == 0\", delay_abort_eval: 5s }").contains("delay_abort_eval applies only with abort_on_fail: true"))
        #expect(try refused("{ threshold: \"count == 0\", abort_on_fail: true, delay_abort_eval: 25h }").contains("must be at most 24h"))
        #expect(try refused("{ threshold: \"count == 0\", abort_on_fail: yes please }").contains("expected true or false"))
        #expect(try refused("{ threshold: \"p(99) < 1s\", abort_on_fail: true }").contains("does not apply"))
    }

    @Test("wrong types and out-of-range values")
    func types() throws {
        #expect(try only(Self.valid.replacingOccurrences(of: "users: 10", with: "users: many")) == "test.yaml:3:10: fleet.users: expected a whole number")
        #expect(try only(Self.valid.replacingOccurrences(of: "users: 10", with: "users: 0")).hasSuffix("fleet.users: must be between 1 and 10000000, got 0"))
        #expect(try only(Self.valid + "\nleak_probes: 150%").contains("leak_probes: '150%' is not a percentage between 0% and 100%"))
        let sources = Self.valid.replacingOccurrences(of: "  users: 10", with: "  users: 10\n  source_addresses: [127.0.0.2, \"::1\", 127.0.0.300]")
        #expect(try only(sources) == "test.yaml:4:40: fleet.source_addresses[2]: '127.0.0.300' is not an IPv4 or IPv6 address")
        let good = try ScenarioLoader.parse(sources.replacingOccurrences(of: ", 127.0.0.300", with: ""), file: "ok.yaml")
        #expect(good.fleet.sourceAddresses == ["127.0.0.2", "::1"])
    }

    @Test("durations and rates")
    func units() throws {
        #expect(try only(Self.valid.replacingOccurrences(of: "duration: 1s", with: "duration: soon"))
            .contains("traffic[0].duration: 'soon' is not a duration; write a number with a unit, e.g. 250ms, 30s, 2m, 1h"))
        #expect(try only(Self.valid.replacingOccurrences(of: "rate: 10/s", with: "rate: 10/fortnight"))
            .contains("traffic[0].rate: '10/fortnight' is not a rate; write e.g. 200/s, 12000/m or 5/h"))
    }

    @Test("missing required keys")
    func missing() {
        let found = issues("seed: 1\n")
        #expect(found.map(\.path) == ["name", "fleet"])
        #expect(found[0].message == "required key is missing")
    }

    @Test("enumerations suggest the closest choice")
    func choices() throws {
        #expect(try only(Self.valid + "\nauth: tokn") == "test.yaml:7:7: auth: 'tokn' is not one of basic, token (did you mean 'token'?)")
    }

    @Test("thresholds: unknown metric, bad expression, wrong aggregate")
    func thresholds() throws {
        #expect(try only(Self.valid + "\nthresholds:\n  delivery.lots: [\"count == 0\"]")
            .contains("unknown metric 'delivery.lots' (did you mean 'delivery.lost'?)"))
        #expect(try only(Self.valid + "\nthresholds:\n  delivery.latency: [\"p(99) 250ms\"]")
            .contains("no comparison in 'p(99) 250ms'"))
        #expect(try only(Self.valid + "\nthresholds:\n  delivery.lost: [\"p(99) < 1\"]")
            .contains("'p(99)' does not apply to counter (use count) metric 'delivery.lost'"))
    }

    @Test("cross-checks: lifecycle needs, unknown users, secure without fetch")
    func crossChecks() throws {
        let noReceive = issues(
            Self.valid.replacingOccurrences(of: "[login, register, connect, receive, fetch_secure]", with: "[login, register, connect, fetch_secure]")
        )
        #expect(noReceive.map(\.message).contains("'fetch_secure' needs 'receive'"))
        #expect(noReceive.map(\.message).contains("traffic needs devices that receive; add connect and receive to lifecycle"))
        let noFetch = issues(Self.valid.replacingOccurrences(of: ", fetch_secure]", with: "]"))
        #expect(noFetch.contains { $0.message.contains("add fetch_secure to lifecycle") })
        #expect(try only(Self.valid.replacingOccurrences(of: "kind: secure,", with: "kind: secure, to: {user: user11},"))
            .contains("no user 'user11' in a fleet of 10"))
    }

    @Test("YAML syntax errors carry their position")
    func syntax() throws {
        let message = try only("name: x\nfleet: [unclosed\n")
        #expect(message.hasPrefix("test.yaml:3:1: (document): YAML syntax:"))
    }

    @Test("every problem is reported at once")
    func allAtOnce() {
        let found = issues(
            """
            name: bad name
            seed: -1
            fleet:
              users: 5
              platforms: { apns: 0 }
            deadline: 0s
            traffic:
              - { kind: loud, rate: 1/s, duration: 1s }
            """
        )
        #expect(found.map(\.path) == ["name", "fleet.platforms", "seed", "traffic[0].kind", "deadline"])
    }

    @Test("every shipped scenario is valid")
    func shipped() throws {
        let directory = #filePath.split(separator: "/").dropLast(3).joined(separator: "/")
        let files = try FileManager.default.contentsOfDirectory(atPath: "/\(directory)/scenarios").filter { $0.hasSuffix(".yaml") }
        #expect(files.count >= 5)
        for file in files {
            #expect(throws: Never.self) { try ScenarioLoader.load(path: "/\(directory)/scenarios/\(file)") }
        }
    }
}

import Foundation
