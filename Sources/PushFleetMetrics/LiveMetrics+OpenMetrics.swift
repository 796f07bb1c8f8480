import Foundation
public import PushFleetCore
package import PushFleetLedger
import Prometheus
import Synchronization

/// Exemplars on the live latency histograms, and the OpenMetrics text that carries them.
///
/// swift-prometheus writes the Prometheus text format (0.0.4), which has no exemplars. A scraper
/// that asks for OpenMetrics (`Accept: application/openmetrics-text`, as Prometheus does with
/// exemplar storage on) gets the same samples in OpenMetrics 1.0: counter families named without
/// their `_total`, `# EOF` at the end, and on each bucket of the `delivery` and hop histograms
/// the trace id of the latest push received in it among the traces the run exports (its sample,
/// and its late pushes, which are incidents): a link from a latency to a whole trace in the user's
/// tracing system. (A send's own latency has no exemplar: a sampled send with no delivered pair
/// exports no trace.)
extension LiveMetrics {
    /// Which observations may carry an exemplar: those of sends whose traces the run exports.
    public struct ExemplarSource: Sendable {
        let traces: TraceRoot
        let tracing: Scenario.Tracing
        /// A push received later than this after its send started is late: an incident, whose
        /// trace is exported whatever the sample.
        let deadline: Int64

        public init(run: String, tracing: Scenario.Tracing, deadline: Duration) {
            traces = TraceRoot(run: run)
            self.tracing = tracing
            self.deadline = deadline.nanoseconds
        }

        /// The send's trace id when its trace is exported: it is in the sample, or `late`.
        func traceID(send: Int, late: Bool) -> String? {
            let trace = traces.send(send)
            return late || tracing.samples(trace) ? trace.traceID : nil
        }
    }

    /// One bucket's exemplar: the latest observation that fell in it.
    package struct Exemplar: Sendable, Equatable {
        package var traceID: String
        package var seconds: Double
        /// Wall-clock seconds since the Unix epoch.
        package var timestamp: Double

        package init(traceID: String, seconds: Double, timestamp: Double) {
            self.traceID = traceID
            self.seconds = seconds
            self.timestamp = timestamp
        }
    }

    /// Exemplars from now on name the traces of this run (nil: none, as when requests carry no
    /// trace context).
    public func setExemplarSource(_ source: ExemplarSource?) {
        exemplarState.withLock {
            $0.source = source
            $0.byOperation = [:]
        }
    }

    /// A push received at `at`, `delivery` after its send's intended start (`sendStart`: its real
    /// one), and its hops when the push service said where it went (the backend's from the
    /// intended start, as the report's): each histogram counts it, and its bucket names the
    /// push's trace when the run exports it.
    package func recordReceipt(delivery: Int64, hops: DeliveryLedger.HopTimes?, send: Int, sendStart: Int64, at: Int64) {
        var timed = [(MetricName.delivery, delivery)]
        if let hops {
            timed += [(MetricName.hopBackend, hops.backendCorrected), (MetricName.hopPushService, hops.pushService), (MetricName.hopDevice, hops.device)]
            if let hub = hops.hub { timed.append((MetricName.hopHub, hub)) }
            if let fetch = hops.fetch { timed.append((MetricName.hopFetch, fetch)) }
        }
        for (operation, nanoseconds) in timed { latency(operation).recordNanoseconds(nanoseconds) }
        exemplarState.withLock { state in
            guard let source = state.source, let traceID = source.traceID(send: send, late: at - sendStart > source.deadline) else { return }
            let now = Date().timeIntervalSince1970
            for (operation, nanoseconds) in timed {
                let bucket = Self.buckets.firstIndex { nanoseconds <= $0.nanoseconds } ?? Self.buckets.count
                var row = state.byOperation.removeValue(forKey: operation) ?? Array(repeating: nil, count: Self.buckets.count + 1)
                row[bucket] = Exemplar(traceID: traceID, seconds: Double(nanoseconds) / 1e9, timestamp: now)
                state.byOperation[operation] = row
            }
        }
    }

    /// The registry in OpenMetrics 1.0 text, with exemplars (served for
    /// `Accept: application/openmetrics-text`).
    public func openMetricsExposition() -> [UInt8] {
        let exemplars = exemplarState.withLock { $0.byOperation }
        return Array(Self.openMetrics(fromPrometheusText: String(decoding: exposition(), as: UTF8.self), exemplars: exemplars).utf8)
    }

    /// The OpenMetrics text of swift-prometheus's Prometheus text: a counter's family loses its
    /// `_total` in `# HELP` and `# TYPE` (its samples keep it), the latency histograms' bucket
    /// lines get their exemplars, and `# EOF` ends it.
    package static func openMetrics(fromPrometheusText text: String, exemplars: [String: [Exemplar?]]) -> String {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: true)
        var counters = Set<Substring>()
        for line in lines where line.hasPrefix("# TYPE ") {
            let parts = line.split(separator: " ")
            if parts.count == 4, parts[3] == "counter" { counters.insert(parts[2]) }
        }
        let histogram = operationFamily + "_bucket{"
        var out = ""
        out.reserveCapacity(text.utf8.count + 64 * exemplars.count)
        for line in lines {
            if line.hasPrefix("# TYPE ") || line.hasPrefix("# HELP ") {
                let parts = line.split(separator: " ", maxSplits: 3, omittingEmptySubsequences: false)
                if parts.count >= 3, counters.contains(parts[2]), parts[2].hasSuffix("_total") {
                    out += parts[0] + " " + parts[1] + " " + parts[2].dropLast(6)
                    if parts.count == 4 { out += " " + parts[3] }
                    out += "\n"
                    continue
                }
            } else if line.hasPrefix(histogram), let exemplar = exemplar(for: line, in: exemplars) {
                out += line
                out += " # {trace_id=\"\(exemplar.traceID)\"} \(exemplar.seconds) \(String(format: "%.3f", exemplar.timestamp))\n"
                continue
            }
            out += line
            out += "\n"
        }
        out += "# EOF\n"
        return out
    }

    static var operationFamily: String { "pushfleet_operation_duration_seconds" }

    /// The exemplars kept now, per operation (one per bucket, then +Inf).
    package var exemplars: [String: [Exemplar?]] { exemplarState.withLock { $0.byOperation } }

    /// Whether an `Accept` header lists OpenMetrics text with a weight above zero (Prometheus
    /// sends `application/openmetrics-text;version=1.0.0,…;q=0.5,…`).
    public static func wantsOpenMetrics(_ accept: [String]) -> Bool {
        for range in accept.flatMap({ $0.split(separator: ",") }) {
            let parts = range.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }
            guard parts.first?.lowercased() == "application/openmetrics-text" else { continue }
            let weight = parts.dropFirst().first { $0.lowercased().hasPrefix("q=") }.flatMap { Double($0.dropFirst(2)) } ?? 1
            if weight > 0 { return true }
        }
        return false
    }

    /// The exemplar of a bucket line (`…_bucket{operation="delivery",le="0.005"} 12`), by its
    /// operation label and its bound.
    private static func exemplar(for line: Substring, in exemplars: [String: [Exemplar?]]) -> Exemplar? {
        guard let operation = label("operation", in: line), let row = exemplars[operation], let le = label("le", in: line) else { return nil }
        let index: Int
        if le == "+Inf" {
            index = buckets.count
        } else {
            guard let bound = Double(le), let found = buckets.firstIndex(where: { abs(Double($0.nanoseconds) / 1e9 - bound) <= bound * 1e-9 }) else {
                return nil
            }
            index = found
        }
        return index < row.count ? row[index] : nil
    }

    /// A label's value, for values without escapes (operation names and bounds have none).
    private static func label(_ name: String, in line: Substring) -> String? {
        guard let start = line.range(of: name + "=\"") else { return nil }
        let rest = line[start.upperBound...]
        guard let end = rest.firstIndex(of: "\"") else { return nil }
        return String(rest[..<end])
    }
}
