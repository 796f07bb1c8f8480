import PushFleetCore
import PushFleetScenario
import Testing

/// The stored content's id of a secure or rich send (`content_id:`), and the warnings about
/// extractions nothing uses.
@Suite("API content ids and unused extractions")
struct APIContentIDTests {
    static func scenario(_ secure: String, register: String = "register: { method: POST, path: /d }") -> String {
        """
        name: content
        fleet: { users: 3 }
        lifecycle: [register, connect, receive, fetch_secure]
        traffic: [{ kind: secure, rate: 1/s, duration: 1s }]
        api:
          \(register)
          send:
            secure:
        \(secure.split(separator: "\n").map { "      " + $0 }.joined(separator: "\n"))
          fetch:
            secure: { path: "/content/{{id}}" }
        """
    }

    static func load(_ yaml: String) throws -> ScenarioLoader.Loaded {
        try ScenarioLoader.load(text: yaml, file: "api.yaml")
    }

    static func issues(_ yaml: String) -> [String] {
        ScenarioValidationTests.issuesOf(yaml, file: "api.yaml").map(\.description)
    }

    @Test("content_id reads the stored content's id into the send's own slot, with extract's syntax and options; no warning")
    func contentID() throws {
        let loaded = try Self.load(Self.scenario("method: POST\npath: /push\njson: { to: \"{{to}}\" }\ncontent_id: { json: [/secret_id, /id], optional: true }"))
        #expect(loaded.warnings.isEmpty, "\(loaded.warnings)")
        let send = try #require(loaded.scenario.api?.send[.secure])
        let slot = try #require(send.contentID)
        let extraction = try #require(send.requests[0].extract.first)
        #expect(extraction.variable == .stored(.local, slot: slot) && extraction.name == "content_id" && extraction.optional)
        #expect(extraction.sources == [.json(try JSONPointer("/secret_id")), .json(try JSONPointer("/id"))])
        // The answer names it: the value lands in the slot the sender reads.
        var run = send.makeRun()
        var device: [APIValue?] = []
        _ = run.start(device: device)
        let answer = send.requests[0].extract(headers: [], body: Array(#"{"secret_id":"s-9"}"#.utf8))
        #expect(run.answered(status: 200, extracted: answer, device: &device) == .done(.init()))
        #expect(run.locals[slot] == .text("s-9"))
    }

    @Test("the shipped preset says content_id and earns no warning")
    func preset() throws {
        let api = try #require(ScenarioLoader.preset("appbackend"))
        #expect(api.send[.secure]?.contentID != nil && api.send[.rich]?.contentID != nil)
        #expect(api.send[.secure]?.requests[0].extract.map(\.name) == ["content_id"])
        let loaded = try Self.load("name: p\nfleet: { users: 2 }\nlifecycle: [register, connect, receive, fetch_secure]\ntraffic: [{ kind: secure, rate: 1/s, duration: 1s }]")
        #expect(loaded.warnings.isEmpty, "\(loaded.warnings)")
    }

    @Test("an extract named id in a send still names the content, with a warning to say content_id")
    func legacyID() throws {
        let loaded = try Self.load(Self.scenario("method: POST\npath: /push\nextract: { id: { json: [/id, /Id], optional: true } }"))
        let send = try #require(loaded.scenario.api?.send[.secure])
        #expect(send.contentID == send.localVariables.firstIndex(of: "id"))
        #expect(send.contentID != nil)
        #expect(
            loaded.warnings.map(\.description) == [
                "api.yaml:11:18: warning: api.send.secure.extract.id: an extraction named id in send.secure is read as the stored content's id; say so with content_id: { json: [/id, /Id], optional: true } in its place"
            ]
        )
    }

    @Test("an extraction with another name is not the content id: a warning names it, where it is, and the fix")
    func otherName() throws {
        let loaded = try Self.load(Self.scenario("method: POST\npath: /push\nextract: { secret_id: /secret_id }"))
        #expect(loaded.scenario.api?.send[.secure]?.contentID == nil)
        #expect(
            loaded.warnings.map(\.description) == [
                "api.yaml:11:18: warning: api.send.secure.extract.secret_id: 'secret_id' is extracted but no template, rule, skip_when_known or content refers to it; if this is the stored content's id, write content_id: /secret_id in its place"
            ]
        )
    }

    @Test("values used by a later template, a rule, skip_when_known or content earn no warning; one nothing uses does, in any step")
    func unused() throws {
        let used = Self.scenario(
            "- { method: POST, path: /content, extract: { cid: /id } }\n- { method: POST, path: \"/push/{{cid}}\", content_id: /id }",
            register: """
                register:
                    - { method: POST, path: /d, skip_when_known: [rid], extract: { rid: /id, pk: /pk, spare: /spare } }
                    - { method: PUT, path: "/d/{{rid}}", on: { 410: { forget: [pk], then: restart } } }
                """
        )
        let loaded = try Self.load(used)
        #expect(loaded.warnings.map(\.path) == ["api.register[0].extract.spare"], "\(loaded.warnings)")
        #expect(loaded.warnings.first?.description.contains("use it as {{spare}} in a later request, or leave it out") == true)
    }

    @Test("content_id belongs to secure and rich sends, once per request list; anywhere else it is an error")
    func misplaced() {
        let plain = Self.issues(
            """
            name: c
            fleet: { users: 2 }
            api:
              register: { method: POST, path: /d, content_id: /id }
              send:
                plain: { method: POST, path: /p, content_id: /id }
            traffic: [{ kind: plain, rate: 1/s, duration: 1s }]
            """
        )
        #expect(
            plain == [
                "api.yaml:4:51: api.register.content_id: content_id says where a secure or rich send's answer names the content it stored; register stores none",
                "api.yaml:6:50: api.send.plain.content_id: content_id says where a secure or rich send's answer names the content it stored; send.plain stores none",
            ], "\(plain)"
        )
        let twice = Self.issues(Self.scenario("- { method: POST, path: /a, content_id: /id }\n- { method: POST, path: /b, content_id: /id }"))
        #expect(twice.count == 1 && twice[0].contains("api.send.secure[1].content_id: the stored content's id is already read from request 1"), "\(twice)")
        let stepLevel = Self.issues(Self.scenario("requests: [{ method: POST, path: /a }]\ncontent_id: /id"))
        #expect(stepLevel.count == 1 && stepLevel[0].contains("content_id goes in the request whose answer names the stored content"), "\(stepLevel)")
        let empty = Self.issues(Self.scenario("method: POST\npath: /a\ncontent_id: { optional: true }"))
        #expect(empty.count == 1 && empty[0].contains("api.send.secure.content_id: give one of json, header, cookie, body"), "\(empty)")
    }
}
