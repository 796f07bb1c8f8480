import Foundation
import PushFleetCore
import PushFleetEngine
import PushFleetLauncher
import PushFleetLedger
import PushFleetResults
import PushFleetScenario
import PushFleetTestSupport
import Testing

/// `embedded.tls` in scenario files: read and checked, and a whole run whose backend sends to
/// the push service over HTTP/2 and TLS.
@Suite("TLS in scenarios")
struct TLSScenarioTests {
    static func yaml(embedded: String, target: String = "embedded") -> String {
        """
        name: tls
        seed: 5
        target: \(target)
        fleet:
          users: 6
          devices_per_user: 3
          platforms: { apns: 1, fcm: 1, wns: 1 }
        lifecycle: [login, register, connect, receive, fetch_secure]
        traffic:
          - { name: plain, kind: plain, platforms: [apns, fcm, wns], rate: 10/s, duration: 2s }
          - { name: secure, kind: secure, rate: 5/s, duration: 2s }
        deadline: 30s
        grace: 1s
        # What is judged is that every push arrives over TLS, not how fast devices set up: TLS
        # handshakes on a loaded machine took devices past the 10 s default.
        timeouts: { login: 120s, register: 120s, connect: 120s, send: 120s, fetch: 120s }
        embedded:
        \(embedded)
        thresholds:
          delivery.misdelivered: ["count == 0"]
          delivery.lost: ["count == 0"]
          sends.late_start_ratio: []
        """
    }

    static func issues(_ yaml: String) -> [String] {
        do {
            _ = try ScenarioLoader.parse(yaml, file: "tls.yaml")
            return []
        } catch {
            return error.issues.map(\.description)
        }
    }

    @Test("tls: true takes the defaults; a mapping sets listen, names and the CA file; bad values are positioned errors")
    func loading() throws {
        let on = try ScenarioLoader.parse(Self.yaml(embedded: "  tls: true"), file: "tls.yaml")
        #expect(on.embedded.tls == Scenario.EmbeddedOptions.TLS())
        #expect(on.embedded.tls?.names == TLSNames.defaults)
        let off = try ScenarioLoader.parse(Self.yaml(embedded: "  tls: false"), file: "tls.yaml")
        #expect(off.embedded.tls == nil)
        let custom = try ScenarioLoader.parse(
            Self.yaml(embedded: "  tls: { listen: \"127.0.0.1:0\", names: [push.example, \"10.0.0.1\"], ca_file: /tmp/ca.pem }"), file: "tls.yaml"
        )
        #expect(custom.embedded.tls?.names == ["push.example", "10.0.0.1"] && custom.embedded.tls?.caFile == "/tmp/ca.pem")

        let badName = Self.issues(Self.yaml(embedded: "  tls: { names: [\"bad name\"] }"))
        #expect(badName.count == 1 && badName[0].contains("embedded.tls.names") && badName[0].contains("neither a DNS name"), "\(badName)")
        let badPort = Self.issues(Self.yaml(embedded: "  tls: { listen: \"127.0.0.1:99999\" }"))
        #expect(badPort.count == 1 && badPort[0].contains("embedded.tls.listen"), "\(badPort)")
        let typo = Self.issues(Self.yaml(embedded: "  tls: { name: [a.example] }"))
        #expect(typo.count == 1 && typo[0].contains("names"), "\(typo)")
        let external = Self.issues(Self.yaml(embedded: "  tls: true", target: "{ backend: \"http://127.0.0.1:1\", pns: \"http://127.0.0.1:2\" }"))
        #expect(external.contains { $0.contains("embedded.tls") && $0.contains("external") }, "\(external)")
    }

    @Test("a run with embedded.tls: the backend sends every platform over HTTP/2 and TLS with real credentials, and every push arrives")
    func run() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pushfleet-tls-run-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let caFile = directory.appendingPathComponent("ca.pem").path
        let result = try await FleetRunTests.run(Self.yaml(embedded: "  tls: { ca_file: \"\(caFile)\" }"))
        #expect(result.rulesHeld, "\(result.thresholds.filter { !$0.passed })")
        #expect(result.delivery.delivered > 0 && result.delivery.lost == 0)
        #expect(Set(result.deliveryByPlatform.filter { $0.value.delivered > 0 }.keys) == ["apns", "fcm", "wns"])
        #expect(try String(contentsOfFile: caFile, encoding: .utf8).contains("BEGIN CERTIFICATE"))
    }
}
