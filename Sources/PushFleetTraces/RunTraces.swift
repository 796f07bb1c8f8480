import Foundation
public import PushFleetCore
public import PushFleetResults

/// The traces a run exports: its incidents' (every lost, late, misdelivered, duplicate, stale,
/// unverified pair and leak kept in incidents.csv) and its sample of delivered pairs'. Per send,
/// the send's span under the id its request carried, so the backend's spans of it join as
/// children; per pair, a span of the ledger's verdict, a child of the send's: for an incident
/// with the hop and reason it was put at, for a delivered pair with a child span per hop.
public enum RunTraces {
    public static let service = TraceService.fleet
    /// The push service's spans: made by the run from what the push service told it (its reports
    /// and the push's frame), under the service that did the work.
    public static let pushService = TraceService.pushService

    public struct Built: Sendable {
        public var spans: [TraceSpan]
        /// The push service's part of the sampled pushes, each under the provider request that
        /// handed it over (``pushService``).
        public var pushServiceSpans: [TraceSpan] = []
        /// Incidents that name no send (a push no send of the run made): no trace to join.
        public var withoutSend: Int
        public var incidents = 0
        public var sampled = 0
    }

    /// Nil when the run's requests carried no trace context or its start time cannot be read.
    public static func build(_ result: RunResult) -> Built? {
        guard result.info.traceContext == true, let run = result.info.runID,
            let origin = result.info.startedAtNanoseconds ?? startNanoseconds(result.info.startedAt)
        else { return nil }
        func wall(_ seconds: Double?) -> UInt64? {
            seconds.map { UInt64(clamping: origin + Int64(($0 * 1e9).rounded())) }
        }
        let traces = TraceRoot(run: run)
        var spans: [TraceSpan] = []
        var pushServiceSpans: [TraceSpan] = []
        var sendsDone = Set<Int>()
        var withoutSend = 0
        func sendSpan(_ id: Int, start: UInt64, end: UInt64, kind: String?, sender: String?, recipient: String?) -> TraceIdentity {
            let send = traces.send(id)
            guard sendsDone.insert(id).inserted else { return send }
            var attributes: [(String, TraceSpan.Value)] = [
                ("pushfleet.run.id", .string(run)), ("pushfleet.send.id", .int(Int64(id))), ("http.request.method", .string("POST")),
            ]
            if let kind { attributes.append(("pushfleet.send.kind", .string(kind))) }
            if let sender { attributes.append(("pushfleet.sender", .string(sender))) }
            if let recipient { attributes.append(("pushfleet.recipient", .string(recipient))) }
            spans.append(TraceSpan(identity: send, parent: nil, name: "send", kind: .client, start: start, end: end, attributes: attributes))
            return send
        }
        var incidents = 0
        for (index, incident) in (result.incidents ?? []).enumerated() {
            guard let id = incident.send else {
                withoutSend += 1
                continue
            }
            let start = wall(incident.sendStartSecond) ?? wall(incident.eventSecond) ?? UInt64(clamping: origin)
            let end = wall(incident.sendEndSecond) ?? start
            let send = sendSpan(id, start: start, end: end, kind: incident.sendKind, sender: incident.sender, recipient: incident.recipient)
            var attributes: [(String, TraceSpan.Value)] = [("pushfleet.outcome", .string(incident.outcome)), ("pushfleet.detail", .string(incident.detail))]
            if let device = incident.device { attributes.append(("pushfleet.device", .int(Int64(device)))) }
            if let user = incident.deviceUser { attributes.append(("pushfleet.device.user", .string(user))) }
            if let platform = incident.platform { attributes.append(("pushfleet.platform", .string(platform))) }
            if let hop = incident.hop { attributes.append(("pushfleet.hop", .string(hop))) }
            if let reason = incident.reason { attributes.append(("pushfleet.reason", .string(reason))) }
            let verdict = [incident.outcome, incident.hop, incident.reason].compactMap { $0 }.joined(separator: ": ")
            spans.append(
                TraceSpan(
                    identity: send.child(UInt64(index) &+ 0x1_0000_0000), parent: send.span, name: "pair \(incident.outcome)", kind: .internal,
                    start: start, end: max(start, wall(incident.eventSecond) ?? end), attributes: attributes, status: .error(verdict)
                )
            )
            if let push = incidentPush(incident, send: send, handed: wall(incident.pushSecond), stepped: wall(incident.pushStepSecond)) {
                pushServiceSpans.append(push)
            }
            incidents += 1
        }
        for delivery in result.sampledDeliveries ?? [] {
            guard let start = wall(delivery.sendStartSecond), let end = wall(delivery.sendEndSecond), let received = wall(delivery.receivedSecond)
            else { continue }
            let send = sendSpan(delivery.send, start: start, end: end, kind: nil, sender: nil, recipient: nil)
            var attributes: [(String, TraceSpan.Value)] = [
                ("pushfleet.outcome", .string("delivered")), ("pushfleet.device", .int(Int64(delivery.device))),
            ]
            if let platform = delivery.platform { attributes.append(("pushfleet.platform", .string(platform))) }
            let pair = send.child(UInt64(delivery.device) &+ 0x2_0000_0000)
            // The hops one after another, as the push service and the device said where it went;
            // the pair ends where they do (the receipt's own time is kept to the millisecond).
            var hops: [TraceSpan] = []
            var at = start
            let timed = [
                ("backend", delivery.backendNs), ("hub", delivery.hubNs), ("push_service", delivery.pushServiceNs), ("device", delivery.deviceNs),
                ("fetch", delivery.fetchNs),
            ]
            for (number, (hop, nanoseconds)) in timed.enumerated() {
                guard let nanoseconds, nanoseconds >= 0 else { continue }
                let next = at &+ UInt64(nanoseconds)
                hops.append(
                    TraceSpan(
                        identity: pair.child(UInt64(number + 1)), parent: pair.span, name: "hop \(hop)", kind: .internal, start: at, end: next,
                        attributes: [("pushfleet.hop", .string(hop))]
                    )
                )
                at = next
            }
            let pairEnd = hops.isEmpty ? received &+ UInt64(max(0, delivery.fetchNs ?? 0)) : at
            spans.append(
                TraceSpan(
                    identity: pair, parent: send.span, name: "pair delivered", kind: .internal, start: start, end: pairEnd, attributes: attributes,
                    status: .ok
                )
            )
            spans += hops
            if let backend = delivery.backendNs, let pushService = delivery.pushServiceNs, let device = delivery.deviceNs {
                let accepted = start &+ UInt64(max(0, backend)) &+ UInt64(max(0, delivery.hubNs ?? 0))
                let written = accepted &+ UInt64(max(0, pushService))
                let read = written &+ UInt64(max(0, device))
                let path = pushPath(
                    send: send, delivery: delivery, accepted: accepted, written: written, read: read,
                    fetched: delivery.fetchNs.map { read &+ UInt64(max(0, $0)) }
                )
                pushServiceSpans.append(path.push)
                spans += path.device
            }
        }
        var built = Built(spans: spans, withoutSend: withoutSend)
        built.pushServiceSpans = pushServiceSpans
        built.incidents = incidents
        built.sampled = result.sampledDeliveries?.count ?? 0
        return built
    }

    /// A push's own path, as the user's tracing system should show it beside the backend's spans:
    /// the push service's span under the provider request that handed the push over (the span
    /// its `traceparent` named), the device's receipt under that, and the device's fetch under
    /// the receipt, with the id its request carried, so the backend's span of the fetch joins.
    /// A push whose request carried no context, or another trace's, starts a trace of its own,
    /// linked to its send (as the ledger linked it, by the nonce), and its fetch is not joined.
    static func pushPath(
        send: TraceIdentity, delivery: SampledDelivery, accepted: UInt64, written: UInt64, read: UInt64, fetched: UInt64?
    ) -> (push: TraceSpan, device: [TraceSpan]) {
        var attributes: [(String, TraceSpan.Value)] = [("pushfleet.hop", .string("push_service")), ("pushfleet.device", .int(Int64(delivery.device)))]
        if let platform = delivery.platform { attributes.append(("pushfleet.platform", .string(platform))) }
        let provider = delivery.pushSpan.flatMap { UInt64($0, radix: 16) }.flatMap { $0 == 0 ? nil : $0 }
        let push: TraceSpan
        var fetchIdentity: TraceIdentity?
        if let provider {
            let request = TraceIdentity(high: send.high, low: send.low, span: provider)
            push = TraceSpan(
                identity: request.child(UInt64(delivery.device) &+ 0x3_0000_0000), parent: provider, name: "push accepted", kind: .server,
                start: accepted, end: written, attributes: attributes, status: .ok
            )
            // The id the device's fetch request carried (VirtualDevice.receive).
            fetchIdentity = request.child(UInt64(delivery.device))
        } else {
            push = linked(
                to: send, number: UInt64(delivery.device) &+ 0x3_0000_0000, name: "push accepted", start: accepted, end: written, attributes: attributes,
                status: .ok
            )
        }
        let receipt = TraceSpan(
            identity: push.identity.child(1), parent: push.identity.span, name: "push received", kind: .consumer, start: written, end: read,
            attributes: [("pushfleet.hop", .string("device")), ("pushfleet.device", .int(Int64(delivery.device)))]
        )
        var device = [receipt]
        if let fetchIdentity, let fetched {
            device.append(
                TraceSpan(
                    identity: fetchIdentity, parent: receipt.identity.span, name: "fetch", kind: .client, start: read, end: fetched,
                    attributes: [("pushfleet.hop", .string("fetch")), ("http.request.method", .string("GET"))]
                )
            )
        }
        return (push, device)
    }

    /// The push service's part of a lost or late pair's push, as the push service reported it:
    /// `push refused` (the status and reason the backend was answered), `push dropped`, `push
    /// held`, `push expired`… from its acceptance to its latest step, or `push accepted` to its
    /// write for one that was written. A child of the provider request's span when that request
    /// carried the send's trace; else a trace of its own linked to the send, never a guessed parent.
    static func incidentPush(_ incident: RunResult.Incident, send: TraceIdentity, handed: UInt64?, stepped: UInt64?) -> TraceSpan? {
        guard let step = incident.pushStep, let handed, let device = incident.device else { return nil }
        var attributes: [(String, TraceSpan.Value)] = [
            ("pushfleet.hop", .string("push_service")), ("pushfleet.push.step", .string(step)), ("pushfleet.device", .int(Int64(device))),
            ("pushfleet.outcome", .string(incident.outcome)),
        ]
        if let platform = incident.platform { attributes.append(("pushfleet.platform", .string(platform))) }
        if let reason = incident.reason { attributes.append(("pushfleet.reason", .string(reason))) }
        let name = step == "written" ? "push accepted" : "push \(step.replacingOccurrences(of: "_", with: " "))"
        // Refused, or never to reach its device: the push service's part failed; a late one's did not.
        let status: TraceSpan.Status = incident.outcome == "late" ? .ok : .error([step, incident.reason].compactMap { $0 }.joined(separator: ": "))
        let end = max(handed, stepped ?? handed)
        let number = UInt64(device) &+ 0x4_0000_0000
        if let span = incident.pushSpan.flatMap({ UInt64($0, radix: 16) }), span != 0 {
            let request = TraceIdentity(high: send.high, low: send.low, span: span)
            return TraceSpan(
                identity: request.child(number), parent: span, name: name, kind: .server, start: handed, end: end, attributes: attributes, status: status
            )
        }
        return linked(to: send, number: number, name: name, start: handed, end: end, attributes: attributes, status: status)
    }

    /// The push service's span of a push whose provider request carried no trace context, or
    /// another trace's: a trace of its own (derived from the send's and `number`), linked to the
    /// send, as the ledger linked them by the nonce.
    static func linked(
        to send: TraceIdentity, number: UInt64, name: String, start: UInt64, end: UInt64, attributes: [(String, TraceSpan.Value)],
        status: TraceSpan.Status
    ) -> TraceSpan {
        let own = send.child(number)
        let trace = TraceIdentity(high: send.high ^ 0x9E37_79B9_7F4A_7C15, low: own.span, span: own.span ^ 0xD6E8_FEB8_6659_FD93)
        return TraceSpan(
            identity: trace.span == 0 ? trace.child(1) : trace, parent: nil, name: name, kind: .server, start: start, end: end,
            attributes: attributes + [("pushfleet.push.context", .string("none or another trace"))], status: status,
            links: [.init(target: send, attributes: [("pushfleet.link", .string("the send whose nonce the push carried"))])]
        )
    }

    /// The run's start in nanoseconds since the epoch, from run.json's ISO 8601 time.
    static func startNanoseconds(_ text: String) -> Int64? {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        guard let date = formatter.date(from: text) ?? ISO8601DateFormatter().date(from: text) else { return nil }
        // Whole seconds and milliseconds apart: a Double of nanoseconds since 1970 is off by
        // hundreds of nanoseconds.
        let seconds = date.timeIntervalSince1970.rounded(.down)
        return Int64(seconds) * 1_000_000_000 + Int64(((date.timeIntervalSince1970 - seconds) * 1e3).rounded()) * 1_000_000
    }
}
