import Foundation
import PushFleetMetrics

extension ErrorClass {
    /// Reasons an answer may name that its error class carries: the reference backend's store
    /// failures (docs/backend.md). A fixed set, so a backend's text cannot grow the labels.
    static let answerReasons: Set<String> = ["store_full", "store_limit", "store_unreachable"]

    /// An unexpected status, with the answer's reason when it names one of ``answerReasons``
    /// (`register.post:status_507:store_full`): a run against a store that fills up or vanishes
    /// then says so in errors.csv and its summary, not only which status came back.
    static func status(_ operation: String, _ status: Int, answer: some Collection<UInt8>) -> Self {
        guard let reason = answerReason(answer) else { return .status(operation, status) }
        return .failed(operation, "status_\(status):\(reason)")
    }

    /// `{"error":{"reason":R}}` or `{"reason":R}` with R one of ``answerReasons``; error
    /// answers are small, so a large body is not read.
    static func answerReason(_ body: some Collection<UInt8>) -> String? {
        guard body.count <= 4096, body.first(where: { $0 > 0x20 }) == UInt8(ascii: "{"),
            let object = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any]
        else { return nil }
        let reason = (object["error"] as? [String: Any])?["reason"] ?? object["reason"]
        return (reason as? String).flatMap { answerReasons.contains($0) ? $0 : nil }
    }
}
