/// Host names and addresses only this machine can reach.
public enum LoopbackHost {
    /// `localhost`, `::1` or an address in 127.0.0.0/8, as a URL or listen address names it
    /// (an IPv6 host without its brackets).
    public static func contains(_ host: String) -> Bool {
        host == "localhost" || host == "::1" || host.hasPrefix("127.")
    }
}
