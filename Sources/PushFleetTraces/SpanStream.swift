public import PushFleetCore

/// A long-lived server's spans (`pushfleet serve`'s backend and hub), exported as an
/// OpenTelemetry SDK's batch span processor exports them: every ``interval`` each recorder is
/// drained and its spans posted in batches, under its own service. A server has no ledger to
/// choose traces by, so it exports every span its sampled callers caused; what a ring lost
/// between two drains (it keeps ``SpanRecorder/capacity``) and what a collector refused or
/// never took are counted, never waited for: the servers' work comes first.
public struct SpanStream: Sendable {
    public var recorders: [SpanRecorder]
    public var exporter: OTLPExporter
    public var interval: Duration
    public var scope: (name: String, version: String)

    public init(recorders: [SpanRecorder], exporter: OTLPExporter, interval: Duration = .seconds(1), scope: (name: String, version: String)) {
        self.recorders = recorders
        self.exporter = exporter
        self.interval = interval
        self.scope = scope
    }

    public struct Totals: Sendable, Equatable {
        public var exported = 0
        /// Overwritten in a ring before a drain reached them.
        public var overwritten = 0
        /// Posted and refused, or not taken in time.
        public var failed = 0
        /// The first failure, in words.
        public var failure: String?
    }

    /// Drains and exports the recorders once.
    public func flush(into totals: inout Totals) async {
        var services: [ServiceSpans] = []
        for recorder in recorders {
            let drained = recorder.drain()
            totals.overwritten += drained.overwritten
            if !drained.spans.isEmpty { services.append(ServiceSpans(service: recorder.service, spans: drained.spans)) }
        }
        guard !services.isEmpty else { return }
        let report = await exporter.export(services, scope: scope)
        totals.exported += report.exported
        totals.failed += report.failed
        if totals.failure == nil { totals.failure = report.failure }
    }

    /// Exports every ``interval`` until `stopped` returns (a graceful shutdown, a cancellation),
    /// then once more for what the last moments recorded.
    /// - Parameter wait: sleeps for one interval; returns false once the stream should stop.
    public func run(wait: @Sendable (Duration) async -> Bool) async -> Totals {
        var totals = Totals()
        while await wait(interval) {
            await flush(into: &totals)
        }
        await flush(into: &totals)
        return totals
    }
}
