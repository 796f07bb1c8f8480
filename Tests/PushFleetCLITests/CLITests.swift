import Foundation
import NIOHTTP1
import PushFleetCore
import PushFleetLedger
import PushFleetReport
import PushFleetEngine
import PushFleetLauncher
import PushFleetResults
import PushFleetTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The real binary: exit codes, and reports written even when a run is interrupted.
@Suite("Command line")
struct CLITests {
    static var binary: String { product("pushfleet") }

    /// The repository's root folder.
    static let root = Repository.root

    /// An executable of the same build as the tests.
    static func product(_ name: String) -> String {
        let directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        // The test bundle sits beside the products of the same build.
        for candidate in [directory, directory.deletingLastPathComponent()] {
            let path = candidate.appendingPathComponent(name).path
            if FileManager.default.isExecutableFile(atPath: path) { return path }
        }
        return root.appendingPathComponent(".build/debug/\(name)").path
    }

    static func temporaryDirectory() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("pushfleet-test-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    /// A run that passes must pass on a loaded machine too: `deadline` is what counts a push
    /// late, so a test that asserts a pass gives one no scheduler delay reaches.
    static func scenario(traffic: String = "2s", threshold: String = "p(99) < 10s", deadline: String = "2s") -> String {
        """
        name: cli
        fleet:
          users: 20
          devices_per_user: 2
          platforms: { apns: 1, fcm: 1 }
        lifecycle: [login, register, connect, receive, fetch_secure]
        traffic:
          - { kind: secure, rate: 20/s, duration: \(traffic) }
        deadline: \(deadline)
        grace: 1s
        thresholds:
          delivery.latency: ["\(threshold)"]
          delivery.misdelivered: ["count == 0"]
          sends.late_start_ratio: []
        """
    }

    struct Outcome {
        var status: Int32
        var output: String
    }

    static func launch(_ arguments: [String], in directory: URL, executable: String = binary) throws -> (Process, Pipe) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.currentDirectoryURL = directory
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        return (process, pipe)
    }

    /// Sends SIGINT to a launched command after `delay`, and reads what it wrote until it exits:
    /// its output, its status, and how long it took to stop.
    static func interrupt(_ process: Process, _ pipe: Pipe, after delay: Duration) async throws -> (text: String, status: Int32, stopped: Duration) {
        try await Task.sleep(for: delay)
        kill(process.processIdentifier, SIGINT)
        let started = ContinuousClock.now
        let handle = pipe.fileHandleForReading
        let (data, status) = try await offPool {
            let data = handle.readDataToEndOfFile()
            process.waitUntilExit()
            return (data, process.terminationStatus)
        }
        return (String(decoding: data, as: UTF8.self), status, ContinuousClock.now - started)
    }

    static func run(_ arguments: [String], in directory: URL, executable: String = binary) async throws -> Outcome {
        try await offPool { try runBlocking(arguments, in: directory, executable: executable) }
    }

    private static func runBlocking(_ arguments: [String], in directory: URL, executable: String) throws -> Outcome {
        let (process, pipe) = try launch(arguments, in: directory, executable: executable)
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return Outcome(status: process.terminationStatus, output: String(decoding: data, as: UTF8.self))
    }

    @Test("a warning is printed with its position and validate still exits 0; --explain shows each platform's requests")
    func warningsAndPlatforms() async throws {
        let directory = try Self.temporaryDirectory()
        let yaml = """
            name: w
            fleet: { users: 2, platforms: { apns: 1, fcm: 1 } }
            lifecycle: [register, connect, receive, fetch_secure]
            traffic: [{ kind: secure, rate: 1/s, duration: 1s }]
            api:
              register:
                apns: { method: POST, path: /devices/apns, json: { token: "{{device.push_token}}" } }
                fcm: { method: POST, path: /devices/fcm, json: { registration_id: "{{device.push_token}}" } }
              send:
                secure: { method: POST, path: /s, json: "{{message}}", extract: { secret_id: /secret_id } }
              fetch:
                secure: { path: "/c/{{id}}" }
            """
        try yaml.write(to: directory.appendingPathComponent("w.yaml"), atomically: true, encoding: .utf8)
        let validate = try await Self.run(["validate", "--explain", "w.yaml"], in: directory)
        #expect(validate.status == 0, "\(validate.output)")
        #expect(validate.output.contains("w.yaml:10:71: warning: api.send.secure.extract.secret_id: 'secret_id' is extracted but no template"), "\(validate.output)")
        #expect(validate.output.contains("write content_id: /secret_id in its place"), "\(validate.output)")
        #expect(validate.output.contains("register (its fcm requests)") && validate.output.contains(#"{"registration_id":"#), "\(validate.output)")
    }

    @Test("invalid input exits 2 with the problem located")
    func invalid() async throws {
        let directory = try Self.temporaryDirectory()
        try "name: x\nfleet: { users: 0 }\n".write(to: directory.appendingPathComponent("bad.yaml"), atomically: true, encoding: .utf8)
        let validate = try await Self.run(["validate", "bad.yaml"], in: directory)
        #expect(validate.status == 2)
        #expect(validate.output.contains("bad.yaml:2:17: fleet.users: must be between 1 and 10000000, got 0"))
        #expect(try await Self.run(["run", "bad.yaml"], in: directory).status == 2)
        #expect(try await Self.run(["run", "missing.yaml"], in: directory).status == 2)
        // Trace settings are checked before anything runs.
        let otlp = try await Self.run(["run", "bad.yaml", "--otlp-endpoint", "collector:4318"], in: directory)
        #expect(otlp.status == 2 && otlp.output.contains("--otlp-endpoint must be an http:// or https:// URL"), "\(otlp.output)")
        let link = try await Self.run(["run", "bad.yaml", "--trace-url", "http://jaeger/trace/"], in: directory)
        #expect(link.status == 2 && link.output.contains("--trace-url must contain {trace_id}"), "\(link.output)")
        for command in [["capacity", "bad.yaml"], ["shards", "bad.yaml", "--local", "2"], ["merge", "bad", "--out", "merged"], ["serve"]] {
            let flagged = try await Self.run(command + ["--otlp-endpoint", "ftp://c"], in: directory)
            #expect(flagged.status == 2 && flagged.output.contains("--otlp-endpoint must be an http:// or https:// URL"), "\(command): \(flagged.output)")
        }
        #expect(try await Self.run(["serve", "--backend-listen", "nowhere"], in: directory).status == 2)
        // An open admin API only where nobody else can reach it; limits in range.
        let open = try await Self.run(["serve", "--pns-listen", "0.0.0.0:0", "--admin-auth", "off"], in: directory)
        #expect(open.status == 2 && open.output.contains("--admin-auth off needs the push service on loopback only"), "\(open.output)")
        #expect(try await Self.run(["serve", "--admin-token", "short"], in: directory).status == 2)
        #expect(try await Self.run(["serve", "--idle-timeout", "1ms"], in: directory).output.contains("idle timeout must be between 100ms and 24h"))
        #expect(try await Self.run(["serve", "--max-connections", "0"], in: directory).status == 2)
        for loops in ["0", "1025"] {
            let outcome = try await Self.run(["serve", "--event-loops", loops], in: directory)
            #expect(outcome.status == 2 && outcome.output.contains("--event-loops must be between 1 and 1024, got \(loops)"), "\(outcome.output)")
        }
        for loops in ["many", "99999999999999999999"] {
            let outcome = try await Self.run(["serve", "--event-loops", loops], in: directory)
            #expect(outcome.status == 2 && outcome.output.contains("--event-loops"), "\(outcome.output)")
        }
        // A lifetime that would carry an expiry past Int64 stopped the server at the first registration.
        let ttl = try await Self.run(["serve", "--registration-ttl", "100000d"], in: directory)
        #expect(ttl.status == 2 && ttl.output.contains("--registration-ttl must be between 1s and 3650d"), "\(ttl.output)")
        #expect(try await Self.run(["serve", "--token-ttl", "500ms"], in: directory).status == 2)
        for ping in ["10ms", "2h", "nonsense", "-1s"] {
            let outcome = try await Self.run(["serve", "--gateway-ping", ping], in: directory)
            #expect(outcome.status == 2 && outcome.output.contains("gateway-ping"), "--gateway-ping \(ping): \(outcome.output)")
        }
        #expect(try await Self.run(["run", "--no-such-flag", "bad.yaml"], in: directory).status == 2)
        // The notification hub's flags.
        let badHub = try await Self.run(["serve", "--hub", "Endpoint=sb://x/;SharedAccessKeyName=k"], in: directory)
        #expect(badHub.status == 2 && badHub.output.contains("SharedAccessKey is missing"), "\(badHub.output)")
        #expect(try await Self.run(["serve", "--hub", "Endpoint=sb://x/;SharedAccessKeyName=k;SharedAccessKey=v"], in: directory).output.contains("EntityPath"))
        #expect(try await Self.run(["serve", "--hub-name", "admin"], in: directory).status == 2)
        #expect(try await Self.run(["serve", "--hub-key", "short"], in: directory).status == 2)
        #expect(try await Self.run(["serve", "--hub", "embedded", "--pns-url", "http://127.0.0.1:9"], in: directory).status == 2)
        try "name: ext\ntarget: { backend: http://127.0.0.1:9, pns: http://127.0.0.1:9 }\nfleet: { users: 1 }\ntraffic: []\n"
            .write(to: directory.appendingPathComponent("ext.yaml"), atomically: true, encoding: .utf8)
        let external = try await Self.run(["run", "--hub", "ext.yaml"], in: directory)
        #expect(external.status == 2 && external.output.contains("--hub needs the embedded target"), "\(external.output)")
    }

    @Test("api check passes the reference backend through every step; a description whose send misses the recipient fails; --explain shows the requests")
    func apiCheck() async throws {
        let directory = try Self.temporaryDirectory()
        try Self.scenario().write(to: directory.appendingPathComponent("ok.yaml"), atomically: true, encoding: .utf8)
        let passed = try await Self.run(["api", "check", "ok.yaml"], in: directory)
        #expect(passed.status == 0, "\(passed.output)")
        #expect(passed.output.contains("→ register.put: PUT /api/register/") && passed.output.contains("pass  fetch_secure:"), "\(passed.output)")
        #expect(passed.output.contains("api check passed"))
        // The same backend described wrongly: every secure send goes to a user nobody is.
        let wrong = Self.scenario() + """

            api:
              register:
                - { name: post, method: POST, path: /api/register, extract: { registration_id: "" } }
                - { name: put, method: PUT, path: "/api/register/{{registration_id}}", json: { Platform: "{{device.platform}}", Handle: "{{device.push_token}}" } }
              headers: { Authorization: "{{basic_auth}}" }
              send:
                secure: { method: POST, path: /api/notifications/secure, query: { to_tag: "nobody-{{to}}" }, json: "{{message}}" }
              fetch:
                secure: { path: "/api/notifications/{{id}}", content: /Payload }
              receive:
                apns: { secure_id: /secureId }
                fcm: { secure_id: /message/data/secureId }
            """
        try wrong.write(to: directory.appendingPathComponent("wrong.yaml"), atomically: true, encoding: .utf8)
        let failed = try await Self.run(["api", "check", "wrong.yaml", "--quiet"], in: directory)
        #expect(failed.status == 99 && failed.output.contains("FAIL  pushes: expected 2, delivered 0, late 0, lost 2"), "\(failed.output)")
        // Plain sends work; every secure send fails once its rule runs out (the backend's 200 is
        // not the 201 described, retried once): the plain pushes alone must not make it pass.
        let halfWorking = Self.scenario().replacingOccurrences(
            of: "  - { kind: secure, rate: 20/s, duration: 2s }",
            with: "  - { kind: plain, platforms: [apns, fcm], rate: 20/s, duration: 2s }\n  - { kind: secure, rate: 20/s, duration: 2s }"
        ) + """

            api:
              register:
                - { name: post, method: POST, path: /api/register, extract: { registration_id: "" } }
                - { name: put, method: PUT, path: "/api/register/{{registration_id}}", json: { Platform: "{{device.platform}}", Handle: "{{device.push_token}}" } }
              headers: { Authorization: "{{basic_auth}}" }
              send:
                plain: { requests: [{ method: POST, path: /api/notifications, query: { pns: "{{platform}}", to_tag: "{{to}}" }, json: "{{message}}" }], per_platform: true }
                secure: { method: POST, path: /api/notifications/secure, query: { to_tag: "{{to}}" }, json: "{{message}}", expect: [201], on: { 200: { then: retry } } }
              fetch:
                secure: { path: "/api/notifications/{{id}}", content: /Payload }
              receive:
                apns: { secure_id: /secureId }
                fcm: { secure_id: /message/data/secureId }
            """
        #expect(halfWorking.contains("kind: plain"))
        try halfWorking.write(to: directory.appendingPathComponent("half.yaml"), atomically: true, encoding: .utf8)
        let half = try await Self.run(["api", "check", "half.yaml", "--quiet"], in: directory)
        #expect(half.status == 99 && half.output.contains("FAIL  sends: 1 failed") && half.output.contains("api check FAILED"), "\(half.output)")
        let explained = try await Self.run(["validate", "--explain", "wrong.yaml"], in: directory)
        #expect(explained.status == 0)
        #expect(explained.output.contains("POST /api/notifications/secure?to_tag=nobody-user2"), "\(explained.output)")
    }

    @Test("a passing run exits 0, a failed threshold 99, and the reports are written")
    func exitCodes() async throws {
        try await RunGate.exclusive {
            let directory = try Self.temporaryDirectory()
            try Self.scenario(deadline: "30s").write(to: directory.appendingPathComponent("ok.yaml"), atomically: true, encoding: .utf8)
            // Only its threshold fails, however slow the machine: no push can be late within 30 s.
            try Self.scenario(threshold: "p(99) < 1us", deadline: "30s").write(to: directory.appendingPathComponent("strict.yaml"), atomically: true, encoding: .utf8)
            let ok = try await Self.run(["run", "ok.yaml", "--out", "ok-report", "--quiet"], in: directory)
            #expect(ok.status == 0, "\(ok.output)")
            // A report folder in use, or a file in the way, is refused before anything runs.
            let again = try await Self.run(["run", "ok.yaml", "--out", "ok-report", "--quiet"], in: directory)
            #expect(again.status == 2 && again.output.contains("the folder exists and is not empty"), "\(again.output)")
            try "x".write(to: directory.appendingPathComponent("a-file"), atomically: true, encoding: .utf8)
            let blocked = try await Self.run(["run", "ok.yaml", "--out", "a-file", "--quiet"], in: directory)
            #expect(blocked.status == 2 && blocked.output.contains("a file is in the way"), "\(blocked.output)")
            let strict = try await Self.run(["run", "strict.yaml", "--out", "strict-report", "--quiet"], in: directory)
            #expect(strict.status == 99, "\(strict.output)")
            #expect(strict.output.contains("FAIL  delivery.latency: p(99) < 1us"))
            let junit = try String(contentsOf: directory.appendingPathComponent("strict-report/junit.xml"), encoding: .utf8)
            #expect(junit.contains("failures=\"1\"") && junit.contains("p(99) &lt; 1us failed: measured"))
            // `report` re-renders every file from run.json alone.
            try FileManager.default.removeItem(at: directory.appendingPathComponent("ok-report/users.csv"))
            #expect(try await Self.run(["report", "ok-report"], in: directory).status == 0)
            #expect(FileManager.default.fileExists(atPath: directory.appendingPathComponent("ok-report/users.csv").path))
            // compare: the strict run against itself has no regressions; against a run made 10× slower it does.
            #expect(try await Self.run(["compare", "strict-report", "strict-report"], in: directory).status == 0)
            let runJSON = directory.appendingPathComponent("ok-report/run.json")
            var slow = try ReportFiles.decodeRunJSON(Data(contentsOf: runJSON))
            var histogram = LatencyHistogram()
            for _ in 0..<100 { histogram.record(nanoseconds: 900_000_000) }
            slow.histograms["delivery"] = histogram
            slow.delivery.lost += 1
            try FileManager.default.createDirectory(at: directory.appendingPathComponent("slow"), withIntermediateDirectories: true)
            try ReportFiles.runJSON(slow).write(to: directory.appendingPathComponent("slow/run.json"))
            let regression = try await Self.run(["compare", "ok-report", "slow", "--tolerance", "20%"], in: directory)
            #expect(regression.status == 99, "\(regression.output)")
            #expect(regression.output.contains("REGRESSION") && regression.output.contains("lost: 0 → 1  REGRESSION"))
            #expect(FileManager.default.fileExists(atPath: directory.appendingPathComponent("slow/compare.html").path))
            #expect(try await Self.run(["compare", "ok-report", "slow", "--tolerance", "lots"], in: directory).status == 2)
        }
    }

    @Test("--metrics-listen serves Prometheus text while the run lasts, and OpenMetrics to a scraper that asks for it")
    func metricsEndpoint() async throws {
        try await RunGate.exclusive {
            let directory = try Self.temporaryDirectory()
            // A run far longer than the scrapes need, ended by SIGINT once they are done: a fixed
            // sleep raced the run's end when the test's own threads were starved.
            // Some pushes refused (throttled), so that errors by class have samples too.
            let throttled = Self.scenario(traffic: "120s") + "\nfaults:\n  - { at: 0s, pns: { throttle: 20% } }"
            try throttled.write(to: directory.appendingPathComponent("m.yaml"), atomically: true, encoding: .utf8)
            let (process, pipe) = try Self.launch(["run", "m.yaml", "--out", "report", "--metrics-listen", "127.0.0.1:0"], in: directory)
            defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
            let handle = pipe.fileHandleForReading
            let output = try await offPool {
                var output = ""
                while !output.contains("/metrics\n") {
                    let data = handle.availableData
                    guard !data.isEmpty else { break }
                    output += String(decoding: data, as: UTF8.self)
                }
                return output
            }
            let line = try #require(output.split(separator: "\n").first { $0.hasPrefix("metrics: ") })
            let url = String(line.dropFirst("metrics: ".count))
            // The listener is bound before its address is printed; scrape until the fleet is in.
            var scrape = try await TestHTTP.request(.GET, url)
            let deadline = ContinuousClock.now + .seconds(60)
            while !scrape.text.contains("pushfleet_devices{state=\"ready\"} 40"), ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(250))
                scrape = try await TestHTTP.request(.GET, url)
            }
            #expect(scrape.status == 200)
            #expect(scrape.headers.first(name: "content-type")?.hasPrefix("text/plain; version=0.0.4") == true)
            #expect(scrape.text.contains("# TYPE pushfleet_sends_total counter"))
            #expect(scrape.text.contains("pushfleet_devices{state=\"ready\"} 40"))
            #expect(scrape.text.contains("pushfleet_operation_duration_seconds_bucket{operation=\"http.register.put\""))
            // A scraper that asks for OpenMetrics (as Prometheus does) gets it, ended by # EOF.
            let open = try await TestHTTP.request(
                .GET, url, headers: [("accept", "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5")]
            )
            #expect(open.headers.first(name: "content-type")?.hasPrefix("application/openmetrics-text; version=1.0.0") == true)
            #expect(open.text.hasSuffix("\n# EOF\n") && open.text.contains("# TYPE pushfleet_sends counter\n"), "\(open.text.suffix(200))")
            #expect(open.text.contains("pushfleet_devices{state=\"ready\"} 40"))
            // Pairs by outcome so far, once the traffic has run a deadline; then every query of
            // the Grafana dashboard names metrics (and operations) this scrape has.
            while !(scrape.text.contains("pushfleet_delivery_pairs{") && scrape.text.contains("pushfleet_errors_total{")),
                ContinuousClock.now < deadline + .seconds(60)
            {
                try await Task.sleep(for: .milliseconds(250))
                scrape = try await TestHTTP.request(.GET, url)
            }
            #expect(scrape.text.contains("pushfleet_delivery_pairs{outcome=\"delivered\"}"), "\(scrape.text.suffix(500))")
            let dashboard = try Data(contentsOf: Self.root.appendingPathComponent("deploy/grafana/pushfleet.json"))
            let queries = Self.dashboardQueries(try #require(try JSONSerialization.jsonObject(with: dashboard) as? [String: Any]))
            #expect(queries.count >= 10, "\(queries)")
            for query in queries {
                for name in Self.matches(#/pushfleet_[a-z0-9_]+/#, in: query) {
                    #expect(scrape.text.contains("\n\(name){") || scrape.text.contains("\n\(name) "), "\(name) of \(query) is not exported")
                }
                for operation in Self.matches(#/operation="([^"]+)"/#, in: query) {
                    #expect(scrape.text.contains("operation=\"\(operation.dropFirst(11).dropLast())\""), "\(operation) of \(query) is not exported")
                }
            }
            kill(process.processIdentifier, SIGINT)
            let status = try await offPool {
                _ = handle.readDataToEndOfFile()
                process.waitUntilExit()
                return process.terminationStatus
            }
            #expect(status == 1)
            #expect(FileManager.default.fileExists(atPath: directory.appendingPathComponent("report/run.json").path))
        }
    }

    /// Every `expr` of a Grafana dashboard's panels.
    static func dashboardQueries(_ dashboard: [String: Any]) -> [String] {
        (dashboard["panels"] as? [[String: Any]] ?? []).flatMap { panel in
            (panel["targets"] as? [[String: Any]] ?? []).compactMap { $0["expr"] as? String }
        }
    }

    static func matches(_ regex: Regex<Substring>, in text: String) -> [String] {
        text.matches(of: regex).map { String($0.output) }
    }

    static func matches(_ regex: Regex<(Substring, Substring)>, in text: String) -> [String] {
        text.matches(of: regex).map { String($0.output.0) }
    }

    @Test("SIGINT mid-run still writes every report, marked aborted")
    func interrupted() async throws {
        try await RunGate.exclusive {
            let directory = try Self.temporaryDirectory()
            try Self.scenario(traffic: "60s").write(to: directory.appendingPathComponent("long.yaml"), atomically: true, encoding: .utf8)
            let (process, pipe) = try Self.launch(["run", "long.yaml", "--out", "report"], in: directory)
            // Long enough for the fleet to be in and sends to be flowing on a loaded machine.
            let (text, status, stopped) = try await Self.interrupt(process, pipe, after: .seconds(6))
            // Well before the 60 s of traffic would have ended.
            #expect(stopped < .seconds(40), "\(text)")
            #expect(status == 1, "\(text)")
            let report = directory.appendingPathComponent("report")
            for name in ["run.json", "summary.csv", "operations.csv", "users.csv", "timeseries.csv", "errors.csv", "junit.xml", "report.html"] {
                #expect(FileManager.default.fileExists(atPath: report.appendingPathComponent(name).path), "\(name)")
            }
            let result = try ReportFiles.decodeRunJSON(Data(contentsOf: report.appendingPathComponent("run.json")))
            #expect(result.info.aborted && result.info.abortReason == "received SIGINT")
            #expect(result.counters["sends"] ?? 0 > 0)
            let summary = try String(contentsOf: report.appendingPathComponent("summary.csv"), encoding: .utf8)
            #expect(summary.contains("result,aborted"))
        }
    }
}
