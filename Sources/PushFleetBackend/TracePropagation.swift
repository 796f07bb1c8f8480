import HTTPTypes
import Hummingbird
import PushFleetCore
import W3CTraceContext

/// The W3C Trace Context a request to the backend came with, handed on to the push service with
/// every push the request makes: a backend that propagates context, as any instrumented one does,
/// so that the push service's and the device's part of a push join the sender's trace. A
/// `traceparent` the library does not accept is dropped, not repaired, as the W3C rules ask.
///
/// With a ``SpanRecorder`` the backend is instrumented as an OpenTelemetry SDK instruments one: a
/// server span per request under the caller's span, its store calls and a client span per
/// request it makes under that, each outgoing request carrying its client span's id.
enum TracePropagation {
    @TaskLocal static var current: TraceContext?
    /// The span the current request's work is recorded under, and where; nil when not recording.
    @TaskLocal static var recording: Recording?

    struct Recording: Sendable {
        var span: TraceIdentity
        var spans: SpanRecorder
    }

    /// The headers a provider or hub request carries for the current context: the caller's
    /// context as it came, when the backend records no spans.
    static var headers: [(String, String)] { headers(for: current) }

    /// The headers that hand `context` on as it came.
    static func headers(for context: TraceContext?) -> [(String, String)] {
        headers(for: context, parent: context?.traceParentHeaderValue)
    }

    /// The headers that hand `context` on, read from the `traceparent` text `parent`: that text
    /// is handed on as it is, not written anew (every push asks). The library reads only the form
    /// it writes (version `00`, 55 bytes, lowercase hex), so the two are the same bytes.
    static func headers(for context: TraceContext?, parent: String?) -> [(String, String)] {
        guard let context, let parent else { return [] }
        var headers = [("traceparent", parent)]
        if let state = context.traceStateHeaderValue { headers.append(("tracestate", state)) }
        return headers
    }

    /// A request made under the current span: a client span of its own, whose id its headers
    /// carry; ``Outgoing/finish(status:error:)`` records it once the answer is in. The URL is
    /// made only when recording: every push asks.
    static func outgoing(_ method: String, url: @autoclosure () -> String) -> Outgoing? {
        guard let recording else { return nil }
        let span = recording.span.child(recording.spans.nextSalt())
        var headers = [("traceparent", span.traceparent)]
        if let state = current?.traceStateHeaderValue { headers.append(("tracestate", state)) }
        return Outgoing(
            recording: recording, span: span, method: method, url: url(), start: UInt64(clamping: WallClock.nanoseconds()), headers: headers
        )
    }

    struct Outgoing: Sendable {
        var recording: Recording
        var span: TraceIdentity
        var method: String
        var url: String
        var start: UInt64
        var headers: [(String, String)]

        /// `status` nil: no answer (the request failed or timed out).
        func finish(status: Int?, error: String? = nil) {
            var attributes: [(String, TraceSpan.Value)] = [("http.request.method", .string(method)), ("url.full", .string(url))]
            if let status { attributes.append(("http.response.status_code", .int(Int64(status)))) }
            if let error { attributes.append(("error.type", .string(error))) }
            let failed = status.map { $0 >= 400 } ?? true
            recording.spans.record(
                TraceSpan(
                    identity: span, parent: recording.span.span, name: method, kind: .client, start: start,
                    end: UInt64(clamping: WallClock.nanoseconds()), attributes: attributes,
                    status: failed ? .error(status.map { "status \($0)" } ?? error ?? "no answer") : .unset
                )
            )
        }
    }

    /// Records a unit of the current request's work (a store call) as a child span.
    static func measure<T>(_ name: String, attributes: [(String, TraceSpan.Value)], _ body: () async throws -> T) async rethrows -> T {
        guard let recording else { return try await body() }
        let start = UInt64(clamping: WallClock.nanoseconds())
        var status = TraceSpan.Status.unset
        defer {
            recording.spans.record(
                TraceSpan(
                    identity: recording.span.child(recording.spans.nextSalt()), parent: recording.span.span, name: name, kind: .internal,
                    start: start, end: UInt64(clamping: WallClock.nanoseconds()), attributes: attributes, status: status
                )
            )
        }
        do {
            return try await body()
        } catch {
            status = .error(String(describing: error).prefix(200).description)
            throw error
        }
    }
}

/// Binds ``TracePropagation/current`` for the route that answers a request, and with a recorder
/// records the request's server span.
struct TraceContextMiddleware<Context: RequestContext>: RouterMiddleware {
    var spans: SpanRecorder?

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let parent = request.headers[.traceparent] else { return try await next(request, context) }
        let state = request.headers[values: .tracestate].joined(separator: ",")
        guard let trace = try? TraceContext(traceParentHeaderValue: parent, traceStateHeaderValue: state.isEmpty ? nil : state) else {
            return try await next(request, context)
        }
        // Recorded only under a sampled caller, as a parent-based sampler decides.
        guard let spans, trace.flags.contains(.sampled), let caller = TraceIdentity(traceparent: parent) else {
            return try await TracePropagation.$current.withValue(trace) { try await next(request, context) }
        }
        let recording = TracePropagation.Recording(span: caller.child(spans.nextSalt()), spans: spans)
        let start = UInt64(clamping: WallClock.nanoseconds())
        func record(_ status: Int) {
            let method = request.method.rawValue
            spans.record(
                TraceSpan(
                    identity: recording.span, parent: caller.span, name: method, kind: .server, start: start,
                    end: UInt64(clamping: WallClock.nanoseconds()),
                    attributes: [
                        ("http.request.method", .string(method)), ("url.path", .string(request.uri.path)),
                        ("http.response.status_code", .int(Int64(status))),
                    ],
                    status: status >= 500 ? .error("status \(status)") : .unset
                )
            )
        }
        do {
            let response = try await TracePropagation.$current.withValue(trace) {
                try await TracePropagation.$recording.withValue(recording) { try await next(request, context) }
            }
            record(Int(response.status.code))
            return response
        } catch let error as any HTTPResponseError {
            record(Int(error.status.code))
            throw error
        } catch {
            record(500)
            throw error
        }
    }
}

extension HTTPField.Name {
    static let traceparent = Self("traceparent")!
    static let tracestate = Self("tracestate")!
}
