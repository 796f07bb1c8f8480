import ArgumentParser
import Foundation
import Logging
import PushFleetCore
import PushFleetEngine
import PushFleetLauncher
import PushFleetMetrics
import PushFleetResults
import PushFleetScenario
import PushFleetServerSupport
import ServiceLifecycle

struct Run: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Play a scenario against its target and write the reports.",
        discussion: """
            Exit codes: 0 every threshold passed; 99 a threshold failed; 3 inconclusive (pushfleet itself \
            was the limit: its senders fell behind, its recorder fell behind, or it dropped sends the \
            target had room for); 2 invalid input; 1 anything else (including a run stopped by a \
            signal, whose reports are still written, marked aborted).
            """
    )

    @Argument(help: "The scenario file (YAML).") var scenario: String
    @Option(help: "Write the reports here instead of reports/<scenario>-<UTC time>/.") var out: String?
    @Option(help: "The folder that holds report folders.") var reportsDir = "reports"
    @Option(help: "Override the scenario's seed.") var seed: UInt64?
    @Flag(help: "The embedded backend sends through the embedded notification hub (as the scenario key embedded.hub: true).")
    var hub = false
    @Flag(help: "No progress line.") var quiet = false
    @Option(help: "Serve live Prometheus metrics at http://HOST:PORT/metrics while the run lasts.") var metricsListen: String?
    @Option(help: "Serve a live page of the run at http://[HOST:]PORT/ while it lasts (a port alone listens on loopback; 5665 is k6's).")
    var live: String?
    @Option(help: "Replay with only this network fault (its place in network.faults, from 1): the window a failed run names.")
    var onlyFault: Int?
    @OptionGroup(title: "Traces") var traces: TraceOptions
    @OptionGroup(title: "Shards and target") var shardFlags: ShardFlags

    func validate() throws {
        _ = try shardFlags.resolve()
        if hub, shardFlags.backend != nil {
            throw ValidationError("--hub makes the embedded backend send through its hub; with --backend the backend is another")
        }
        if let metricsListen {
            do { _ = try ListenAddress(parsing: metricsListen) } catch { throw ValidationError("--metrics-listen: \(error)") }
        }
        if let live {
            _ = try LiveServer.address(live)
            if try shardFlags.resolve() != nil {
                throw ValidationError("--live serves a whole run's page; a shard holds only its part of the ledger (a run given --shard or --shard-index-from-env is one part of a sharded run)")
            }
        }
    }

    func run() async throws {
        // Where this process may, the tables of runs killed outright go before a run starts.
        if NFTables.unavailable() == nil { await NFTables.sweepStale() }
        let target = shardFlags.backend.flatMap { backend in shardFlags.pushService.map { (backend: backend, pushService: $0) } }
        let source = try ScenarioSource.load(scenario, overrides: ScenarioOverrides(seed: seed, hub: hub ? true : nil, target: target, onlyFault: onlyFault))
        if let shard = try shardFlags.resolve() {
            try await runShard(shard, source: source)
            return
        }
        let loaded = source.scenario
        let plan = FleetPlan(scenario: loaded, runID: shardFlags.runId?.lowercased() ?? FleetRunner.makeRunID())
        try FileLimit.refuseBeyondLimit(loaded, plan: plan, file: scenario)
        // The report folder is made before the run, so a run is never spent on a place it cannot write.
        let directory = out ?? "\(reportsDir)/\(loaded.name)-\(Self.stamp(Date()))"
        try ReportWriter.prepareOrRefuse(directory)
        let stop = StopControl()
        let signals = SignalWatcher { signal in
            switch stop.escalate(reason: "received \(signal)") {
            case .stopping:
                FileHandleOutput.standardError("\n\(signal): stopping arrivals and sends, finishing work in flight (again to stop now)")
            default:
                FileHandleOutput.standardError("\n\(signal): stopping now, writing what was recorded")
            }
        }
        defer { signals.cancel() }

        let progress = ProgressLine(enabled: !quiet)
        var logger = Logger(label: "pushfleet.run")
        logger.logLevel = .warning
        var options = FleetRunner.Options(provenance: source.provenance, logger: logger) { line in
            progress.show(line)
        }
        let metrics = metricsListen.map { _ in LiveMetrics() }
        options.metrics = metrics
        let broadcast = live.map { _ in LiveBroadcast() }
        if let broadcast {
            broadcast.open(LiveServer.hello(loaded, plan: plan, window: options.liveWindow))
            options.live = { frame in
                let (event, json) = LiveServer.frame(frame)
                broadcast.publish(event, json: json)
            }
        }
        let exporting = (try? traces.configuration()) != nil
        let tracing = loaded.tracing
        options.serverSpans = exporting ? ServerSpans(keeping: { tracing.samples($0) }) : nil
        let runner = FleetRunner(scenario: loaded, plan: plan, options: options)
        // The run and its reports; with --metrics-listen, scrapers get the final values until
        // the reports are written.
        let play: @Sendable () async throws -> RunResult = {
            var result = try await runner.run(stop: stop)
            result.info.traceURL = traces.traceUrl
            progress.finish()
            do { try ReportWriter.write(result, to: directory) } catch {
                FileHandleOutput.standardOutput(SummaryTable.render(result))
                FileHandleOutput.standardError("\(error)")
                broadcast?.close(LiveServer.end(result, reports: directory))
                throw ExitCode(ExitStatus.failure)
            }
            broadcast?.close(LiveServer.end(result, reports: directory))
            return result
        }
        // The listeners, each announced once bound; a port that cannot be had ends the run
        // before any device arrives, naming the flag.
        var listeners: [(service: any Service, bound: Readiness<ListenAddress>, announce: @Sendable (String) -> String)] = []
        if let metrics, let metricsListen {
            let bound = Readiness<ListenAddress>()
            let service = metrics.makeService(listen: try ListenAddress(parsing: metricsListen), bound: bound, logger: logger)
            listeners.append((service, bound, { "metrics: \($0)/metrics" }))
        }
        if let broadcast, let live {
            let bound = Readiness<ListenAddress>()
            let service = LiveServer.makeService(broadcast: broadcast, listen: try LiveServer.address(live), bound: bound, logger: logger)
            listeners.append((service, bound, { "live: \($0)/" }))
        }
        let result: RunResult
        if listeners.isEmpty {
            result = try await play()
        } else {
            let announced = listeners.map { (bound: $0.bound, announce: $0.announce) }
            do {
                result = try await withServices(listeners.map(\.service), logger: logger) {
                    for listener in announced { FileHandleOutput.standardError(listener.announce(try await listener.bound.value().httpURL)) }
                    return try await play()
                }
            } catch let error as ListenError {
                FileHandleOutput.standardError("\(error)")
                throw ExitCode(ExitStatus.invalidInput)
            }
        }
        await TraceExport.export(result, options: traces, servers: options.serverSpans)
        FileHandleOutput.standardOutput(SummaryTable.render(result))
        if let note = Self.deviceCapNote(result) { FileHandleOutput.standardOutput(note) }
        FileHandleOutput.standardOutput("reports: \(directory)")
        let code = ExitStatus.of(result)
        if code != ExitStatus.passed { throw ExitCode(code) }
    }

    /// What a run that met the push service's device cap says of it: the cap, how many device
    /// sockets it refused, and what to do.
    static func deviceCapNote(_ result: RunResult) -> String? {
        guard let marker = result.markers.first(where: { $0.label.hasPrefix(ErrorClass.deviceCapMarkerPrefix) }) else { return nil }
        let refused = result.errors.first { $0.errorClass == ErrorClass.connectAtCapacity.label }?.count ?? 0
        return """

            \(marker.label): \(refused.grouped) device connection attempts refused (\(ErrorClass.connectAtCapacity.label)) from \
            \(String(format: "%.1f", marker.second)) s on. Carry the devices on shared sockets (fleet.push_channel: multiplexed), give \
            the push service more (serve --max-device-connections, --max-connections, a higher open-files limit), or shard the fleet.
            """
    }

    static func stamp(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyyMMdd'T'HHmmss'Z'"
        return formatter.string(from: date)
    }
}
