import Foundation
import PushFleetReport
import PushFleetResults
import PushFleetTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `run --live`: the page and its stream, from outside, as a browser and curl meet them.
// Waiting its turn behind the other suites' whole runs counts toward the limit too.
@Suite("run --live", .timeLimit(.minutes(20)))
struct LiveCLITests {
    /// A short run with a drop fault from its third second: `delivery.lost` fails on the way.
    static let scenario = """
        name: live
        seed: 9
        fleet: { users: 60, devices_per_user: 1, platforms: { apns: 1 }, arrival: { rate: 200/s } }
        lifecycle: [login, register, connect, receive]
        traffic:
          - { name: plain, kind: plain, rate: 40/s, duration: 9s }
        deadline: 1s
        grace: 1s
        faults:
          - { at: 3s, pns: { drop: 20% } }
        thresholds:
          delivery.lost: ["count == 0"]
          sends.late_start_ratio: []
        """

    /// Starts the run and returns it with the page's address once printed.
    static func start(_ directory: URL, extra: [String] = []) async throws -> (Process, ServeHubCLITests.OutputCollector, String) {
        try scenario.write(to: directory.appendingPathComponent("live.yaml"), atomically: true, encoding: .utf8)
        return try await launch(["run", "live.yaml", "--quiet", "--out", "report", "--live", "0"] + extra, in: directory)
    }

    /// Launches a command given `--live` and returns it with the page's address once printed.
    static func launch(_ arguments: [String], in directory: URL) async throws -> (Process, ServeHubCLITests.OutputCollector, String) {
        let (process, pipe) = try CLITests.launch(arguments, in: directory)
        let output = ServeHubCLITests.OutputCollector(pipe)
        let deadline = ContinuousClock.now + .seconds(120)
        while ServeHubCLITests.line("live: ", in: output.text) == nil {
            guard process.isRunning, ContinuousClock.now < deadline else {
                process.terminate()
                throw ServeHubCLITests.CLIFailure(description: "no live address: \(output.text)")
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        return (process, output, ServeHubCLITests.line("live: ", in: output.text)!)
    }

    static func wait(_ process: Process) async -> Int32 {
        await withCheckedContinuation { continuation in
            Thread.detachNewThread {
                process.waitUntilExit()
                continuation.resume(returning: process.terminationStatus)
            }
        }
    }

    struct Event {
        var name: String
        var data: [String: Any]
    }

    static func events(_ text: String) -> [Event] {
        text.components(separatedBy: "\n\n").compactMap { block in
            let lines = block.split(separator: "\n")
            guard let name = lines.first(where: { $0.hasPrefix("event: ") })?.dropFirst(7),
                let data = lines.first(where: { $0.hasPrefix("data: ") })?.dropFirst(6),
                let object = try? JSONSerialization.jsonObject(with: Data(data.utf8)) as? [String: Any]
            else { return nil }
            return Event(name: String(name), data: object)
        }
    }

    @Test("the stream: hello first, a frame a second with growing counts, the lost rule failing before the end, and the verdict the exit code gives; the page is self-contained")
    func stream() async throws {
        try await RunGate.exclusive {
            let directory = try CLITests.temporaryDirectory()
            let (process, _, url) = try await Self.start(directory)
            let page = try await Curl.run(["-sS", "--max-time", "30", url])
            #expect(page.contains("<title>pushfleet live</title>") && page.contains("new EventSource("), "\(page.prefix(300))")
            // Nothing fetched from elsewhere: no external script, style, font or image.
            #expect(!page.contains("src=\"http") && !page.contains("href=\"http") && !page.contains("@import") && !page.contains("url(http"))
            let text = try await Curl.run(["-sN", "--max-time", "300", url + "events"])
            let status = await Self.wait(process)
            let events = Self.events(text)
            #expect(events.first?.name == "hello" && events.last?.name == "end", "\(events.map(\.name))")
            let frames = events.filter { $0.name == "frame" }.map(\.data)
            #expect(frames.count >= 8, "\(frames.count) frames")
            let sends = frames.compactMap { ($0["totals"] as? [String: Any])?["sends"] as? Int }
            #expect(sends == sends.sorted() && (sends.last ?? 0) > (sends.first ?? 0), "\(sends)")
            let hello = try #require(events.first?.data)
            #expect((hello["rules"] as? [[String: Any]])?.contains { $0["metric"] as? String == "delivery.lost" } == true)
            // The lost rule leaves ok during the run, in a frame before the verdict.
            let judged = frames.compactMap { frame -> (Double, String)? in
                guard let judged = frame["judged"] as? [String: Any], let rules = judged["rules"] as? [[String: Any]],
                    let lost = rules.first(where: { $0["metric"] as? String == "delivery.lost" }), let state = lost["state"] as? String
                else { return nil }
                return (frame["second"] as? Double ?? 0, state)
            }
            #expect(judged.contains { $0.1 == "failed" }, "\(judged)")
            let end = try #require(events.last?.data)
            #expect(end["verdict"] as? String == "failed" && end["exitCode"] as? Int == Int(status) && status == 99, "\(end), exit \(status)")
            #expect((end["failed"] as? [String])?.contains("delivery.lost: count == 0") == true, "\(end)")
            // A browser that comes after the end is told everything and the verdict.
            #expect(FileManager.default.fileExists(atPath: directory.appendingPathComponent("report/run.json").path))
        }
    }

    @Test("in headless Chromium: the page counts frames and redraws its charts, reconnects after the stream is dropped, shows the lost rule failing before the verdict, and the verdict")
    func browser() async throws {
        try await RunGate.exclusive {
            let chromium = try TestChromium.path()
            let directory = try CLITests.temporaryDirectory()
            let (process, _, url) = try await Self.start(directory)
            // The virtual-time budget runs the page's timers; Chromium waits while the stream is
            // open, so the DOM is dumped once the run has ended. drop=3 ends each stream after three
            // frames: the page must reconnect to see the rest.
            let dom = try await offPool {
                try TestPostgres.shell(
                    chromium, ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--virtual-time-budget=5000", "--dump-dom", url + "?drop=3"]
                )
            }
            let status = await Self.wait(process)
            #expect(status == 99)
            let body = try #require(dom.output.range(of: "<body").map { String(dom.output[$0.lowerBound...].prefix(400)) }, "\(dom.output.suffix(2000))")
            func attribute(_ name: String) -> String? {
                guard let start = body.range(of: "\(name)=\"") else { return nil }
                return String(body[start.upperBound...].prefix { $0 != "\"" })
            }
            let reconnects = Int(attribute("data-reconnects") ?? "") ?? 0
            let seen = (attribute("data-sends") ?? "").split(separator: ",").compactMap { Int($0) }
            #expect(reconnects >= 1, "\(body)")
            #expect(seen.count >= 3 && seen.last! > seen.first!, "\(body)")
            #expect(dom.output.contains("<polyline"), "charts drawn")
            // Each chart is drawn again with every frame.
            let redraws = dom.output.range(of: "id=\"chart-sends\"").map { String(dom.output[$0.upperBound...].prefix(300)) } ?? ""
            let count = redraws.range(of: "data-redraws=\"").map { Int(redraws[$0.upperBound...].prefix { $0.isNumber }) ?? 0 } ?? 0
            #expect(count >= 3, "chart-sends redrawn \(count) times: \(redraws)")
            // The rule's change is logged at a second before the verdict is.
            let log = dom.output.components(separatedBy: "<li>").dropFirst().map { $0.components(separatedBy: "</li>")[0] }
            let failing = log.firstIndex { $0.contains("delivery.lost count == 0") && ($0.contains("→ failed") || $0.contains("→ breaching")) }
            let verdict = log.firstIndex { $0.hasPrefix("verdict: failed (exit 99)") }
            #expect(failing != nil && verdict != nil && failing! < verdict!, "\(log)")
            #expect(dom.output.contains("report.html"), "the verdict links the reports")
        }
    }

    @Test("abort_on_fail: the run stops once the rule fails over its window, past its delay, writes its reports marked so and exits 99 naming the rule; without --live too")
    func abortOnFail() async throws {
        try await RunGate.exclusive {
            let directory = try CLITests.temporaryDirectory()
            let scenario = Self.scenario.replacingOccurrences(of: "duration: 9s", with: "duration: 60s")
                .replacingOccurrences(of: "delivery.lost: [\"count == 0\"]", with: "delivery.lost: [{ threshold: \"count == 0\", abort_on_fail: true, delay_abort_eval: 2s }]")
            try scenario.write(to: directory.appendingPathComponent("abort.yaml"), atomically: true, encoding: .utf8)
            let outcome = try await CLITests.run(["run", "abort.yaml", "--quiet", "--out", "report"], in: directory)
            #expect(outcome.status == 99, "\(outcome.output)")
            #expect(outcome.output.contains("aborted: delivery.lost: count == 0 failed over its window"), "\(outcome.output)")
            let data = try Data(contentsOf: directory.appendingPathComponent("report/run.json"))
            let run = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
            let info = try #require(run["info"] as? [String: Any])
            #expect(info["abortedBy"] as? String == "delivery.lost: count == 0" && info["aborted"] as? Bool == true, "\(info)")
            // Stopped well before its minute of traffic: the drops began at 3 s, the window lags a deadline.
            let duration = try #require(info["durationSeconds"] as? Double)
            #expect(duration < 40, "ran \(duration) s")
            let rules = try #require(run["thresholds"] as? [[String: Any]])
            #expect(rules.first { $0["metric"] as? String == "delivery.lost" }?["passed"] as? Bool == false)
        }
    }

    @Test("capacity --live: each step announced and judged on the stream as the search goes, the bracket narrowing, the page's steps table and load charts drawn in Chromium, the search's verdict at the end")
    func capacity() async throws {
        try await RunGate.exclusive {
            let directory = try CLITests.temporaryDirectory()
            try CapacityCLITests.scenario().write(to: directory.appendingPathComponent("cap.yaml"), atomically: true, encoding: .utf8)
            // The stream is asked for before the search starts, and again until its page is up: on
            // a loaded machine a search whose first step fails ends within seconds of that, and
            // the page with it.
            let port = try RawSocket.freePort()
            let url = "http://127.0.0.1:\(port)/"
            let stream = Task {
                try await Curl.run(["-sN", "--retry-connrefused", "--retry", "300", "--retry-delay", "1", "--retry-max-time", "300", "--max-time", "900", url + "events"])
            }
            let (process, output, printed) = try await Self.launch(["capacity", "cap.yaml", "--quiet", "--out", "report", "--live", "127.0.0.1:\(port)"], in: directory)
            #expect(printed == url)
            let chromium = try TestChromium.path()
            async let dom = offPool {
                try TestPostgres.shell(chromium, ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--virtual-time-budget=5000", "--dump-dom", url])
            }
            let status = await Self.wait(process)
            let text: String
            do { text = try await stream.value } catch {
                Issue.record("\(error); the search exited \(status): \(output.text)")
                return
            }
            let events = Self.events(text)
            let hello = try #require(events.first { $0.name == "hello" }?.data)
            #expect((hello["capacity"] as? [String: Any])?["unit"] as? String == "sends/s", "\(hello)")
            let stepsStarted = events.compactMap { event -> [String: Any]? in event.name == "step" ? event.data : nil }
            let judged = events.compactMap { event -> [String: Any]? in event.name == "stepDone" ? event.data : nil }
            let result = try JSONSerialization.jsonObject(with: Data(contentsOf: directory.appendingPathComponent("report/capacity.json"))) as? [String: Any]
            let steps = try #require(result?["steps"] as? [[String: Any]])
            #expect(judged.count == steps.count && stepsStarted.count >= steps.count, "\(stepsStarted.count) started, \(judged.count) judged, \(steps.count) steps")
            #expect(judged.compactMap { ($0["step"] as? [String: Any])?["load"] as? Double } == steps.compactMap { $0["load"] as? Double })
            // Frames of the steps' own runs come between.
            #expect(events.contains { $0.name == "frame" })
            let lastBracket = try #require(judged.last)
            #expect(lastBracket["lastPass"] as? Double == result?["lastPass"] as? Double, "\(lastBracket)")
            let end = try #require(events.last)
            #expect(end.name == "end" && end.data["verdict"] as? String == result?["outcome"] as? String && end.data["exitCode"] as? Int == Int(status), "\(end.data), exit \(status)")
            let page = try await dom.output
            #expect(page.contains("<table id=\"steps\">") && page.components(separatedBy: "<tr>").count > steps.count, "steps table")
            #expect(page.contains("id=\"chart-load-latency\"") && page.contains("<polyline"), "load charts")
            #expect(page.contains(": pass"), "each step's verdict logged")
        }
    }

    @Test("shards --local --live: every shard's state on the stream as the shards play, the merged view from their tapes, a last frame whose count equals the merge's, the merge's verdict; merge --follow on the ended run merges alike")
    func shards() async throws {
        try await RunGate.exclusive {
            let directory = try CLITests.temporaryDirectory()
            let scenario = ShardsCLITests.scenario.replacingOccurrences(of: "duration: 2s", with: "duration: 8s")
            try scenario.write(to: directory.appendingPathComponent("tiny.yaml"), atomically: true, encoding: .utf8)
            // The stream is asked for before the shards start, and again until the page is up: on
            // a loaded machine the run can end before a client started after it connects.
            let port = try RawSocket.freePort()
            let url = "http://127.0.0.1:\(port)/"
            let stream = Task {
                try await Curl.run(["-sN", "--retry-connrefused", "--retry", "300", "--retry-delay", "1", "--retry-max-time", "300", "--max-time", "900", url + "events"])
            }
            let (process, output, printed) = try await Self.launch(
                ["shards", "tiny.yaml", "--local", "2", "--out", "run", "--quiet", "--live", "127.0.0.1:\(port)"], in: directory
            )
            #expect(printed == url)
            let chromium = try TestChromium.path()
            async let dom = offPool {
                try TestPostgres.shell(chromium, ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--virtual-time-budget=5000", "--dump-dom", url])
            }
            let status = await Self.wait(process)
            let text: String
            do { text = try await stream.value } catch {
                Issue.record("\(error); the shards exited \(status): \(output.text)")
                return
            }
            #expect(status == 0)
            let events = Self.events(text)
            let hello = try #require(events.first { $0.name == "hello" }?.data)
            #expect(hello["shards"] as? Int == 2, "\(hello)")
            let frames = events.compactMap { event -> [String: Any]? in event.name == "frame" ? event.data : nil }
            let states = frames.compactMap { $0["shards"] as? [[String: Any]] }
            #expect(states.allSatisfy { $0.count == 2 } && !states.isEmpty, "\(states.count) frames with shards")
            let seen = Set(states.flatMap { $0.compactMap { $0["state"] as? String } })
            #expect(seen.contains("done") && seen.count >= 2, "\(seen)")
            // The last frame, made from the tapes as the shards left them, counts what the merge does.
            let last = try #require(frames.last)
            #expect((last["shards"] as? [[String: Any]])?.allSatisfy { $0["state"] as? String == "done" } == true, "\(last["shards"] ?? "")")
            let merged = try ReportFiles.decodeRunJSON(Data(contentsOf: directory.appendingPathComponent("run/merged/run.json")))
            let received = merged.timeseries.reduce(0) { $0 + $1.received }
            #expect((last["totals"] as? [String: Any])?["received"] as? Int == received && received > 0, "\(last["totals"] ?? ""), merged \(received)")
            let end = try #require(events.last)
            #expect(end.name == "end" && end.data["verdict"] as? String == "passed" && end.data["exitCode"] as? Int == 0, "\(end.data)")
            let page = try await dom.output
            #expect(page.contains("<table id=\"shard-table\">") && page.contains("shard 1: done"), "the page's shards table and log")
            // The page's received count, as it ended, is the merge's.
            let card = page.range(of: "</b>received").map { String(page[..<$0.lowerBound].reversed().prefix { $0 != ">" }.reversed()) }
            #expect(card.flatMap { Int($0.replacingOccurrences(of: ",", with: "")) } == received, "the page shows \(card ?? "no count"), the merge \(received)")
            // merge --follow of the ended run: every shard has ended, so it merges at once.
            let followed = try await CLITests.run(["merge", "run", "--follow", "--live", "0", "--out", "again"], in: directory)
            #expect(followed.status == 0 && followed.output.contains("live: http"), "\(followed.output)")
            let again = try ReportFiles.decodeRunJSON(Data(contentsOf: directory.appendingPathComponent("again/run.json")))
            #expect(again.delivery == merged.delivery)
            let unfollowed = try await CLITests.run(["merge", "run", "--live", "0", "--out", "again2"], in: directory)
            #expect(unfollowed.status == 2 && unfollowed.output.contains("--live needs --follow"), "\(unfollowed.output)")
        }
    }

    @Test("a taken port or a bad value: exit 2 naming --live, before any device arrives")
    func badPort() async throws {
        let directory = try CLITests.temporaryDirectory()
        try Self.scenario.write(to: directory.appendingPathComponent("live.yaml"), atomically: true, encoding: .utf8)
        let holder = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(holder) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(holder, $0, length) } }
        _ = listen(holder, 1)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(holder, $0, &length) } }
        let port = Int(UInt16(bigEndian: address.sin_port))
        let taken = try await CLITests.run(["run", "live.yaml", "--quiet", "--out", "r1", "--live", "\(port)"], in: directory)
        #expect(taken.status == 2 && taken.output.contains("--live 127.0.0.1:\(port): cannot listen"), "\(taken.output)")
        let shard = try await CLITests.run(["run", "live.yaml", "--quiet", "--out", "r3", "--live", "0", "--shard", "0/2"], in: directory)
        #expect(shard.status == 2 && shard.output.contains("--live serves a whole run's page"), "\(shard.output)")
        // A followed run's folder with hostile start records (garbage, a count out of range):
        // the follower ignores them, waits out --wait, and the merge says what is missing.
        for (name, text) in [("shard-0-of-2", "{not json"), ("shard-1-of-2", #"{"runID":"r","index":1,"count":99999999,"scenarioFile":"x","scenarioText":"","overrides":{}}"#)] {
            let folder = directory.appendingPathComponent("followed/\(name)")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            try text.write(to: folder.appendingPathComponent("shard.playing.json"), atomically: true, encoding: .utf8)
        }
        let followed = try await CLITests.run(["merge", "followed", "--follow", "--wait", "2s", "--live", "0", "--out", "m"], in: directory)
        #expect(followed.status == 2 && followed.output.contains("live: http"), "\(followed.output)")
        for bad in ["99999", "nowhere", "127.0.0.1:-1"] {
            let refused = try await CLITests.run(["run", "live.yaml", "--quiet", "--out", "r2", "--live", bad], in: directory)
            #expect(refused.status == 2 && refused.output.contains("--live"), "\(bad): \(refused.output)")
        }
    }
}
