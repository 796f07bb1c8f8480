/// Names of every metric pushfleet records; thresholds and reports use exactly these.
public enum MetricName {
    public static let login = "http.login"
    public static let registerPost = "http.register.post"
    public static let registerPut = "http.register.put"
    public static let connect = "connect"
    public static let send = "http.send"
    public static let fetchSecure = "http.fetch_secure"
    public static let fetchRich = "http.fetch_rich"
    public static let delivery = "delivery"
    public static let endToEnd = "end_to_end"

    /// Latency metrics, in report order.
    public static let operations = [login, registerPost, registerPut, connect, send, delivery, fetchSecure, fetchRich, endToEnd]
    /// Operations measured against an open-model schedule, which also get an uncorrected histogram.
    public static let openModel: Set<String> = [send, delivery, endToEnd]

    /// Delivery outcome counters (`delivery.<outcome>`) and the run's other counters.
    public static let counters = [
        "delivery.expected", "delivery.delivered", "delivery.late", "delivery.lost", "delivery.misdelivered",
        "delivery.duplicates", "delivery.indeterminate", "leaks", "sends", "sends.failed", "sends.dropped", "sends.late_start", "errors",
        "devices.ready", "devices.failed",
    ]
    public static let ratios = ["delivery.lost_ratio", "delivery.misdelivered_ratio", "delivery.late_ratio", "sends.failed_ratio"]

    /// The kind of a metric name, for validating thresholds. Latency metrics may be named with
    /// or without a `.latency` suffix.
    public static func kind(of name: String) -> MetricKind? {
        let base = name.hasSuffix(".latency") ? String(name.dropLast(".latency".count)) : name
        if operations.contains(base) { return .latency }
        if counters.contains(name) { return .counter }
        if ratios.contains(name) { return .ratio }
        return nil
    }

    public static var all: [String] { operations + counters + ratios }
}
