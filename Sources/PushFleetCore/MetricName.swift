/// The rules every run is judged by unless its scenario names the metric under `thresholds`
/// (with its own rules, or an empty list to drop the rule): a run must not pass when the
/// system under test misdelivered, leaked, duplicated, replayed, could not be checked, ignored
/// the push service's feedback, lost pushes, or could not take the load the scenario asked for.
public enum DefaultGate {
    public static let rules: [Threshold] = [
        ("delivery.misdelivered", "count == 0"), ("leaks", "count == 0"), ("delivery.duplicates", "count == 0"),
        ("delivery.stale", "count == 0"), ("delivery.unverified", "count == 0"), ("delivery.sent_to_dead_token", "count == 0"),
        ("delivery.undecryptable", "count == 0"),
        ("delivery.lost_ratio", "value <= 0.001"), ("delivery.late_ratio", "value <= 0.01"), ("delivery.indeterminate_ratio", "value <= 0.05"),
        ("sends.failed_ratio", "value <= 0.01"), ("sends.dropped_ratio", "value <= 0.01"), ("sends.late_start_ratio", "value <= 0.05"),
        ("devices.failed_ratio", "value <= 0.01"),
    ].map { try! Threshold(metric: $0.0, expression: $0.1) }
}

/// Names of every metric pushfleet records; thresholds and reports use exactly these.
public enum MetricName {
    public static let login = "http.login"
    public static let registerPost = "http.register.post"
    public static let registerPut = "http.register.put"
    public static let connect = "connect"
    /// A browser's subscription at the push service (`POST /webpush/subscriptions`).
    public static let webPushSubscribe = "webpush.subscribe"
    /// From a device's intended arrival to ready (corrected); `.raw` from when its setup began.
    public static let setup = "setup"
    public static let send = "http.send"
    public static let fetchSecure = "http.fetch_secure"
    public static let fetchRich = "http.fetch_rich"
    public static let delivery = "delivery"
    public static let endToEnd = "end_to_end"
    /// Each hop of a delivered push (docs/reports.md): they add up to `delivery`, and with
    /// `hop.fetch` to `end_to_end`. `hop.backend` is corrected (from the intended start) like them.
    public static let hopBackend = "hop.backend"
    public static let hopHub = "hop.hub"
    public static let hopPushService = "hop.push_service"
    public static let hopDevice = "hop.device"
    public static let hopFetch = "hop.fetch"
    public static let hops = [hopBackend, hopHub, hopPushService, hopDevice, hopFetch]
    /// How long a device's socket was silent when its keepalive gave it up (network.keepalive).
    public static let phoneDeadLink = "phone.dead_link"
    /// From the start of the partition that cut a device off to its giving the socket up.
    public static let phoneDeadLinkNotice = "phone.dead_link_notice"
    /// From the start of the partition that cut a device off to the gateway's closing its
    /// socket, as the gateway's next `subscribed` says; failed when the gateway had not closed
    /// it by the heal.
    public static let gatewayDeadLinkNotice = "gateway.dead_link_notice"
    /// Pushes the push service handed a device again (their acknowledgement lost with a dead
    /// link), dropped by the device as already had: counted, never receipts.
    public static let phoneRedelivered = "phone.redelivered"

    /// Latency metrics, in report order.
    public static let operations =
        [login, registerPost, registerPut, connect, webPushSubscribe, setup, send, delivery, fetchSecure, fetchRich, endToEnd] + hops
        + [phoneDeadLink, phoneDeadLinkNotice, gatewayDeadLinkNotice, phoneRedelivered]
    /// Operations measured against an open-model schedule, which also get an uncorrected histogram.
    public static let openModel: Set<String> = [send, delivery, endToEnd]

    /// Delivery outcome counters (`delivery.<outcome>`) and the run's other counters.
    public static let counters = [
        "delivery.expected", "delivery.delivered", "delivery.late", "delivery.lost", "delivery.misdelivered",
        "delivery.duplicates", "delivery.indeterminate", "delivery.stale", "delivery.unverified", "delivery.unregistered",
        "delivery.sent_to_dead_token", "delivery.undecryptable", "delivery.replaced", "delivery.recovered", "leaks", "sends", "sends.failed", "sends.dropped", "sends.late_start", "sends.folded",
        "errors", "devices.ready", "devices.failed",
    ]
    public static let ratios = [
        "delivery.lost_ratio", "delivery.misdelivered_ratio", "delivery.late_ratio", "delivery.replaced_ratio", "delivery.indeterminate_ratio", "sends.failed_ratio",
        "sends.dropped_ratio", "sends.late_start_ratio", "devices.failed_ratio",
    ]

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
