import PushFleetClients
import PushFleetCore

/// One request and its answer, for `api check`.
public struct RequestTrace: Sendable {
    /// `register.put`, `send`, `fetch_secure` …
    public var operation: String
    public var method: String
    public var target: String
    public var headers: [String]
    public var body: String?
    /// The answer's status, or nil with `error` when there was none.
    public var status: Int?
    public var error: String?
    public var answer: String
    public var milliseconds: Double
    /// `expected`, `rule` (a status rule handles it), or `unexpected`.
    public var verdict: String

    init(request: APIRequest, rendered: RenderedRequest, result: Result<HTTPExchange, TransportError>) {
        operation = request.operation
        method = rendered.method
        target = rendered.target
        headers = rendered.headers.map { "\($0.name): \($0.value)" }
        body = rendered.body
        switch result {
        case .success(let exchange):
            status = exchange.status
            answer = String(exchange.text.prefix(400))
            milliseconds = Double(exchange.latency) / 1e6
            verdict = request.expect.contains(exchange.status) ? "expected" : request.rule(for: exchange.status) != nil ? "rule" : "unexpected"
        case .failure(let failure):
            error = failure.label
            answer = ""
            milliseconds = Double(failure.end - failure.start) / 1e6
            verdict = "unexpected"
        }
    }
}
