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
}
