import Foundation
import Logging
import NIOCore
import NIOHTTP1
import PushFleetClients
import PushFleetCore
import PushFleetMetrics

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
        if spec.scenario.tracing.propagate, !rendered.headers.contains(where: { $0.name.utf8.count == 11 && $0.name.lowercased() == "traceparent" }) {
            let trace = values.trace ?? spec.traces.device(values.user, request: signals.makeTracedRequest())
            headers.append(("traceparent", trace.traceparent))
        }
        var body: ByteBuffer?
        if let text = rendered.body {
            if let type = rendered.contentType, !headers.contains(where: { $0.0.lowercased() == "content-type" }) {
                headers.append(("Content-Type", type))
            }
            body = ByteBuffer(string: text)
        }
        let result = await http.exchange(HTTPMethod(rawValue: rendered.method), rendered.target, headers: headers, body: body, timeout: request.timeout ?? timeout)
        if let trace = services.trace { trace(RequestTrace(request: request, rendered: rendered, result: result)) }
        switch result {
        case .success(let exchange):
            guard request.expect.contains(exchange.status), !request.extract.isEmpty else {
                return .answered(status: exchange.status, extracted: ExtractedValues(values: [], missing: nil), exchange: exchange)
            }
            let readsHeaders = request.extract.contains { $0.sources.contains(where: \.readsHeaders) }
            let answerHeaders = readsHeaders ? exchange.headers.map { ($0.name, $0.value) } : []
            let extracted = request.extract(headers: answerHeaders, body: exchange.body.readableBytesView)
            for (ref, value) in extracted.values {
                if case .stored(.user, let slot) = ref { spec.users.store(value, user: values.user, slot: slot) }
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
        if step.kind != .login, needsLogin(step), !spec.users.hasAll(user: values.user) {
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
        guard spec.users.firstTime("\(request.operation) \(name)") else { return }
        let places = request.extract.first { $0.name == name }?.sources.map(\.description).joined(separator: ", ") ?? "?"
        emit(.marker("\(request.operation): the answer (\(answer.status)) has no \(name) at \(places); it held: \(Self.excerpt(answer))", at: answer.end))
        services.logger.warning("\(request.operation): the answer (\(answer.status)) has no \(name) at \(places); it held: \(Self.excerpt(answer))")
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
        spec.api.login != nil && spec.stepsNeedingLogin.contains(step.kind)
    }

    /// Logs a user in (the description's login step); true when there is nothing to log in to.
    func login(user: Int, http: BackendClient? = nil) async -> Bool {
        guard let step = spec.api.login else { return true }
        let values = RequestValues(user: user, userName: spec.names.user(user), password: spec.names.password(user), run: spec.runID, users: spec.users)
        return await runStep(step, values: values, http: http ?? services.backend, timeout: spec.scenario.timeouts.login).succeeded
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
