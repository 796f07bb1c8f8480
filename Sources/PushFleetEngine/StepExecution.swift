import Foundation
import Logging
import NIOCore
import NIOHTTP1
import PushFleetClients
import PushFleetCore
import PushFleetMetrics
import Synchronization

/// The values one request's templates are filled from.
struct RequestValues: TemplateValues {
    var user: Int
    var userName: String
    var password: String
    var run: String
    var users: UserValues
    var device: DeviceValues? = nil
    var deviceSlots: [APIValue?] = []
    var locals: [APIValue?] = []
    var platform: String? = nil
    var to: String? = nil
    var message: String? = nil
    var image: String? = nil
    var id: String? = nil
    var victim: String? = nil

    /// What a device contributes: its token as the backend sees it and its platform's name; its
    /// id is worked out from the token when a template asks (kept per device, it would cost a
    /// string per device for a value most descriptions never use).
    struct DeviceValues {
        var pushToken: String
        var platform: String

        var id: String {
            let hex = String(stableHash(pushToken), radix: 16)
            return String(repeating: "0", count: 16 - hex.count) + hex
        }
    }

    func value(of ref: VariableRef) -> APIValue? {
        switch ref {
        case .builtin(let builtin):
            let text: String? =
                switch builtin {
                case .user: userName
                case .password: password
                case .basicAuth: BackendClient.basic(userName, password: password)
                case .run: run
                case .devicePushToken: device?.pushToken
                case .devicePlatform: device?.platform
                case .deviceID: device?.id
                case .platform: platform
                case .to: to
                case .message: message
                case .image: image
                case .imageType: image == nil ? nil : "image/png"
                case .id: id
                case .victim: victim
                }
            return text.map { .text($0) }
        case .stored(.user, let slot): return users.value(user: user, slot: slot)
        case .stored(.device, let slot): return slot < deviceSlots.count ? deviceSlots[slot] : nil
        case .stored(.local, let slot): return slot < locals.count ? locals[slot] : nil
        }
    }
}

/// Values kept per user (what login extracted: a token), shared by the user's devices and senders;
/// and, for the run as a whole, which missing values it has already described.
final class UserValues: Sendable {
    private let slots: Int
    private let values: Mutex<[[APIValue?]]>
    private let described = Mutex<Set<String>>([])

    /// True the first time `key` is asked about in the run: what is described once.
    func firstTime(_ key: String) -> Bool {
        described.withLock { $0.insert(key).inserted }
    }

    init(users: Int, slots: Int) {
        self.slots = slots
        values = Mutex(slots == 0 ? [] : Array(repeating: Array(repeating: nil, count: slots), count: users))
    }

    func value(user: Int, slot: Int) -> APIValue? {
        guard slots > 0 else { return nil }
        return values.withLock { $0[user][slot] }
    }

    func store(_ value: APIValue?, user: Int, slot: Int) {
        guard slots > 0 else { return }
        values.withLock { $0[user][slot] = value }
    }

    func hasAll(user: Int) -> Bool {
        guard slots > 0 else { return true }
        return values.withLock { $0[user].allSatisfy { $0 != nil } }
    }
}

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

/// How one request went, once its answer was read.
enum RequestOutcome {
    case answered(status: Int, extracted: ExtractedValues, exchange: HTTPExchange)
    case failed(StepRun.Failure.Reason, at: Int64)
}

/// How a whole step went.
struct StepResult {
    var succeeded: Bool
    var failure: StepRun.Failure.Reason?
    /// The first request's start and the last answer's end (nil: no request was made).
    var start: Int64?
    var end: Int64?
    /// The last answer, if any.
    var last: HTTPExchange?
    var locals: [APIValue?]
}

extension RunContext {
    /// Renders and makes one request and reads its extractions; values the user keeps (a login
    /// token) are stored here.
    /// - Parameter errors: whether a failure goes to errors.csv (a leak probe's does not).
    func perform(_ request: APIRequest, _ values: RequestValues, http: BackendClient, timeout: Duration, errors: Bool = true) async -> RequestOutcome {
        let rendered: RenderedRequest
        switch request.render(values) {
        case .success(let value): rendered = value
        case .failure(let error):
            if errors { emit(.error(.failed(request.operation, error.label), at: now())) }
            return .failed(.render(error.description), at: now())
        }
        var headers = rendered.headers.map { ($0.name, $0.value) }
        var body: ByteBuffer?
        if let text = rendered.body {
            if let type = rendered.contentType, !headers.contains(where: { $0.0.lowercased() == "content-type" }) {
                headers.append(("Content-Type", type))
            }
            body = ByteBuffer(string: text)
        }
        let result = await http.exchange(HTTPMethod(rawValue: rendered.method), rendered.target, headers: headers, body: body, timeout: request.timeout ?? timeout)
        if let trace { trace(RequestTrace(request: request, rendered: rendered, result: result)) }
        switch result {
        case .success(let exchange):
            guard request.expect.contains(exchange.status), !request.extract.isEmpty else {
                return .answered(status: exchange.status, extracted: ExtractedValues(values: [], missing: nil), exchange: exchange)
            }
            let answerHeaders = exchange.headers.map { ($0.name, $0.value) }
            let extracted = request.extract(headers: answerHeaders, body: exchange.body.readableBytesView)
            for (ref, value) in extracted.values {
                if case .stored(.user, let slot) = ref { users.store(value, user: values.user, slot: slot) }
            }
            return .answered(status: exchange.status, extracted: extracted, exchange: exchange)
        case .failure(let error):
            if errors { emit(.error(.failed(request.operation, error.label), at: error.end)) }
            return .failed(.transport(error.label), at: error.end)
        }
    }

    /// Records a request's answer under its metric once the step has judged it: an answer that
    /// failed the step counts as a failure and, unless the ledger judges it (fetches), an error.
    func record(_ request: APIRequest, _ exchange: HTTPExchange, failed: Bool, errorClass: Bool = true) {
        if let metric = request.metric {
            emit(.operation(metric: metric, nanoseconds: exchange.latency, failed: failed, at: exchange.end))
        }
        if failed && errorClass { emit(.error(.status(request.operation, exchange.status, answer: exchange.body.readableBytesView), at: exchange.end)) }
    }

    /// Runs a step that is nobody's state but its own (a send, a fetch, a probe, a login) to its
    /// end, logging the user in when a rule says so.
    /// - Parameter record: whether its requests go to their metrics (probes' do not).
    func runStep(
        _ step: APIStep, values base: RequestValues, http: BackendClient, timeout: Duration, record: Bool = true, statusErrors: Bool = true
    ) async -> StepResult {
        var values = base
        if step.kind != .login, needsLogin(step), !users.hasAll(user: values.user) {
            _ = await login(user: values.user, http: http)
        }
        var run = step.makeRun()
        var device = values.deviceSlots
        var result = StepResult(succeeded: false, failure: nil, start: nil, end: nil, last: nil, locals: [])
        var action = run.start(device: device)
        while true {
            switch action {
            case .perform(let index):
                let request = step.requests[index]
                values.locals = run.locals
                values.deviceSlots = device
                switch await perform(request, values, http: http, timeout: timeout, errors: record) {
                case .answered(let status, let extracted, let exchange):
                    result.start = result.start ?? exchange.start
                    result.end = exchange.end
                    result.last = exchange
                    let handled = run.handles(status: status)
                    action = run.answered(status: status, extracted: extracted, device: &device)
                    if record { self.record(request, exchange, failed: !handled, errorClass: statusErrors) }
                case .failed(let reason, let at):
                    result.start = result.start ?? at
                    result.end = at
                    result.last = nil
                    action = run.failed(reason)
                }
            case .login:
                action = run.loggedIn(await login(user: values.user, http: http))
            case .done:
                result.succeeded = true
                result.locals = run.locals
                return result
            case .failed(let failure):
                result.failure = failure.reason
                result.locals = run.locals
                if record, case .missingValue(let name) = failure.reason, let answer = result.last {
                    reportMissing(name, request: step.requests[failure.request], answer: answer)
                }
                return result
            }
        }
    }

    /// An expected answer without a value the step extracts: an error of its own
    /// (`login:missing_value:token`), not only the knock-on `unset_variable` of the steps that
    /// needed it; the first time in the run, a marker names where it was looked for and what the
    /// answer held.
    func reportMissing(_ name: String, request: APIRequest, answer: HTTPExchange) {
        emit(.error(.failed(request.operation, "missing_value:\(name)"), at: answer.end))
        guard users.firstTime("\(request.operation) \(name)") else { return }
        let places = request.extract.first { $0.name == name }?.sources.map(\.description).joined(separator: ", ") ?? "?"
        emit(.marker("\(request.operation): the answer (\(answer.status)) has no \(name) at \(places); it held: \(Self.excerpt(answer))", at: answer.end))
        logger.warning("\(request.operation): the answer (\(answer.status)) has no \(name) at \(places); it held: \(Self.excerpt(answer))")
    }

    /// The start of an answer, for a message: at most 200 characters, controls escaped.
    static func excerpt(_ answer: HTTPExchange) -> String {
        let text = String(decoding: answer.body.readableBytesView.prefix(600), as: UTF8.self)
        guard !text.isEmpty else { return "an empty body" }
        var out = ""
        for scalar in text.unicodeScalars {
            if out.count >= 200 {
                out += "…"
                break
            }
            out += scalar.value < 0x20 || scalar.value == 0x7F ? scalar.escaped(asASCII: true) : String(scalar)
        }
        return out
    }

    /// Whether a step's requests use what login gives.
    func needsLogin(_ step: APIStep) -> Bool {
        api.login != nil && stepsNeedingLogin.contains(step.kind)
    }

    /// Logs a user in (the description's login step); true when there is nothing to log in to.
    func login(user: Int, http: BackendClient? = nil) async -> Bool {
        guard let step = api.login else { return true }
        let values = RequestValues(user: user, userName: names.user(user), password: names.password(user), run: runID, users: users)
        return await runStep(step, values: values, http: http ?? backend, timeout: scenario.timeouts.login).succeeded
    }

    /// The failure of a step as a bounded label (`status_404`, `timeout` …).
    static func label(_ reason: StepRun.Failure.Reason?) -> String {
        switch reason {
        case .status(let status)?: "status_\(status)"
        case .transport(let label)?: label
        case .missingValue?: "missing_value"
        case .render?: "unset_variable"
        case .login?: "login_failed"
        case nil: "failed"
        }
    }
}

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
