import PushFleetCore
import Yams

extension ScenarioLoader {
    static func readThresholds(_ node: Node, _ r: NodeReader, extraLatency: Set<String>) -> [Threshold] {
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
                // `{threshold: "count == 0", abort_on_fail: true, delay_abort_eval: 10s}`, as k6 writes it.
                var abort: Threshold.AbortOnFail?
                var textNode = expressionNode
                if case .mapping = expressionNode {
                    guard let fields = r.mapping(expressionNode, path, allowed: ["threshold", "abort_on_fail", "delay_abort_eval"]) else { continue }
                    guard let given = fields["threshold"] else {
                        r.report(expressionNode, path, "a rule written as a mapping needs 'threshold' (e.g. {threshold: \"count == 0\", abort_on_fail: true})")
                        continue
                    }
                    textNode = given
                    var delay = fields["delay_abort_eval"].flatMap { r.duration($0, path + ".delay_abort_eval", allowZero: true) }
                    if let given = delay, given > .seconds(86_400), let node = fields["delay_abort_eval"] {
                        r.report(node, path + ".delay_abort_eval", "must be at most 24h")
                        delay = nil
                    }
                    if fields["abort_on_fail"].flatMap({ r.bool($0, path + ".abort_on_fail") }) == true {
                        abort = .init(delay: delay ?? .zero)
                    } else if fields["delay_abort_eval"] != nil {
                        r.report(expressionNode, path, "delay_abort_eval applies only with abort_on_fail: true")
                    }
                }
                guard let text = r.string(textNode, path) else { continue }
                do {
                    var threshold = try Threshold(metric: metric, expression: text)
                    threshold.abortOnFail = abort
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
}
