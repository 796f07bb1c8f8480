import Foundation

/// Where a run sends its traces: `--otlp-endpoint`, else OpenTelemetry's standard variables
/// (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, used as given; `OTEL_EXPORTER_OTLP_ENDPOINT`, with
/// `/v1/traces` appended; `OTEL_EXPORTER_OTLP_[TRACES_]HEADERS`, `key=value` pairs separated by
/// commas, values percent-decoded). OTLP over HTTP with protobuf bodies; off unless one is set.
public struct OTLPConfiguration: Sendable, Equatable {
    public var endpoint: String
    public var headers: [(String, String)]

    public static func == (a: OTLPConfiguration, b: OTLPConfiguration) -> Bool {
        a.endpoint == b.endpoint && a.headers.elementsEqual(b.headers) { $0 == $1 }
    }

    public struct Problem: Error, CustomStringConvertible, Equatable {
        public var description: String
    }

    /// Nil when no endpoint is configured; a ``Problem`` naming the setting when one is unusable.
    /// - Parameter flag: `--otlp-endpoint`'s value: a base URL (`http://collector:4318`) or one
    ///   that already ends in `/v1/traces`.
    public static func resolve(flag: String?, environment: [String: String]) throws(Problem) -> OTLPConfiguration? {
        let given: String
        let source: String
        if let flag {
            given = flag
            source = "--otlp-endpoint"
        } else if let traces = environment["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"], !traces.isEmpty {
            given = traces
            source = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
        } else if let base = environment["OTEL_EXPORTER_OTLP_ENDPOINT"], !base.isEmpty {
            given = base
            source = "OTEL_EXPORTER_OTLP_ENDPOINT"
        } else {
            return nil
        }
        guard let url = URLComponents(string: given), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
            let host = url.host, !host.isEmpty
        else {
            throw Problem(description: "\(source) must be an http:// or https:// URL, not \(given)")
        }
        let endpoint = source == "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" ? given : Self.tracesPath(given)
        let headerText = environment["OTEL_EXPORTER_OTLP_TRACES_HEADERS"] ?? environment["OTEL_EXPORTER_OTLP_HEADERS"] ?? ""
        return OTLPConfiguration(endpoint: endpoint, headers: try headers(headerText))
    }

    /// A base URL with the traces path appended (OpenTelemetry's rule for the shared variable).
    static func tracesPath(_ base: String) -> String {
        if base.hasSuffix("/v1/traces") { return base }
        return (base.hasSuffix("/") ? String(base.dropLast()) : base) + "/v1/traces"
    }

    /// `key=value,key2=value2` (W3C Baggage's list form, as the OpenTelemetry variables use it).
    static func headers(_ text: String) throws(Problem) -> [(String, String)] {
        var headers: [(String, String)] = []
        for item in text.split(separator: ",") where !item.allSatisfy(\.isWhitespace) {
            guard let equals = item.firstIndex(of: "=") else {
                throw Problem(description: "OTEL_EXPORTER_OTLP_HEADERS: \"\(item)\" is not key=value")
            }
            let name = item[..<equals].trimmingCharacters(in: .whitespaces)
            let raw = item[item.index(after: equals)...].trimmingCharacters(in: .whitespaces)
            guard !name.isEmpty, name.utf8.allSatisfy(Self.isTokenByte), let value = raw.removingPercentEncoding,
                value.utf8.allSatisfy({ $0 >= 0x20 && $0 != 0x7F })
            else {
                throw Problem(description: "OTEL_EXPORTER_OTLP_HEADERS: \"\(item)\" is not a header name and value")
            }
            headers.append((name, value))
        }
        return headers
    }

    /// RFC 9110's token characters.
    private static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"): true
        default: "!#$%&'*+-.^_`|~".utf8.contains(byte)
        }
    }
}
