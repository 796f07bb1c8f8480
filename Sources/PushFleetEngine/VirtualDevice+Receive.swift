import Foundation
import NIOCore
import PushFleetClients
import PushFleetCore
import PushFleetLedger
import PushFleetMetrics
import PushFleetWebPush
import PushFleetWire

extension VirtualDevice {
    /// Handles one push as the app would, and reports what it proves to the ledger. A push the
    /// service refused for this device's token is recorded as such, never as a delivery.
    func receive(_ frame: PushFrame, at receivedAt: Int64, context: RunContext) async {
        defer { context.signals.pushHandled() }
        // The push's own trace, where its provider request carried one.
        let pushContext = frame.trace.flatMap(TraceIdentity.init(traceparent:))
        let body: [UInt8]
        if let browser, frame.type != PushFrame.refusedType {
            switch browser.decrypt(frame) {
            case .success(let plaintext): body = plaintext
            case .failure(let error):
                let receipt = DeliveryLedger.Receipt(
                    device: plan.index, attribution: .undecryptable, time: receivedAt, content: .failed(reason: Self.label(error)),
                    path: context.path(of: frame, receivedAt: receivedAt, context: pushContext)
                )
                context.emit(.receipt(receipt, push: frame.push))
                return
            }
        } else {
            body = frame.bodyEncoding == "base64" ? Array(Data(base64Encoded: frame.body) ?? Data()) : Array(frame.body.utf8)
        }
        let content = PushContent(body: body, pushType: frame.pushType, layout: context.spec.api.receive.layout(plan.platform), run: context.spec.runID)
        if frame.type == PushFrame.refusedType {
            context.emit(.rejection(.init(device: plan.index, refused: content.attribution, at: receivedAt, push: frame.push)))
            return
        }
        var arrival = Arrival(at: receivedAt, path: context.path(of: frame, receivedAt: receivedAt, context: pushContext), push: frame.push)
        // The fetch joins the push's trace (RunTraces makes the span this id names).
        arrival.trace = pushContext?.child(UInt64(plan.index))
        let steps = context.spec.scenario.lifecycle
        switch content {
        case .plain:
            emitReceipt(content.attribution, at: arrival, context: context)
        case .secure(let id):
            guard steps.contains(.fetchSecure), let fetch = self.steps.fetch[.secure] else {
                emitReceipt(.content(id), at: arrival, context: context)
                return
            }
            await fetchSecure(id, step: fetch, arrival: arrival, context: context)
        case .rich(let id, let nonce):
            guard steps.contains(.fetchRich), let fetch = self.steps.fetch[.rich] else {
                emitReceipt(nonce?.attribution ?? .content(id), at: arrival, context: context)
                return
            }
            await fetchRich(id, nonce: nonce, step: fetch, arrival: arrival, context: context)
        }
    }

    /// A decryption failure as a bounded label (the ledger's incident detail).
    static func label(_ error: WebPushCryptoError) -> String {
        switch error {
        case .malformed: "malformed payload"
        case .undecryptable: "does not decrypt with the subscription's keys"
        }
    }

    /// When a push arrived, the path its frame names and the push service's number for it.
    struct Arrival {
        var at: Int64
        var path: DeliveryLedger.PushPath?
        var push: UInt64?
        var trace: TraceIdentity? = nil
    }

    private func emitReceipt(
        _ attribution: DeliveryLedger.Attribution, at arrival: Arrival, content: DeliveryLedger.ContentCheck = .none, contentID: String? = nil,
        context: RunContext
    ) {
        let receipt = DeliveryLedger.Receipt(
            device: plan.index, attribution: attribution, time: arrival.at, content: content, contentID: contentID, path: arrival.path
        )
        context.emit(.receipt(receipt, push: arrival.push))
    }

    /// Fetches stored content through the description's fetch step: its content when it
    /// succeeded, else why not (a bounded label). A refusal is judged by the ledger (unverified
    /// or misdelivered), not counted as an error of the run.
    private func fetch(_ id: String, step: APIStep, trace: TraceIdentity?, context: RunContext) async -> Result<(text: String?, at: Int64), FetchFailure> {
        var values = context.values(for: self, slots: keptValues)
        values.id = id
        values.trace = trace
        let result = await context.runStep(step, values: values, http: client(context), timeout: context.spec.scenario.timeouts.fetch, statusErrors: false)
        guard result.succeeded, let answer = result.last else { return .failure(FetchFailure(reason: RunContext.label(result.failure))) }
        let headers = step.content.readsHeaders ? answer.headers.map { ($0.name, $0.value) } : []
        let text = ValueReader.read(step.content, headers: headers, body: answer.body.readableBytesView)?.string
        return .success((text, answer.end))
    }

    struct FetchFailure: Error {
        var reason: String
    }

    private func fetchSecure(_ id: String, step: APIStep, arrival: Arrival, context: RunContext) async {
        let fetched: (text: String?, at: Int64)
        switch await fetch(id, step: step, trace: arrival.trace, context: context) {
        case .success(let answer): fetched = answer
        case .failure(let failure):
            emitReceipt(.content(id), at: arrival, content: .failed(reason: failure.reason), contentID: id, context: context)
            return
        }
        let check = DeliveryLedger.ContentCheck.fetched(at: fetched.at)
        guard let payload = fetched.text, let (nonce, recipient) = PushContent.parseSecurePayload(payload, run: context.spec.runID) else {
            // Content that is no send's: not what was sent to anyone.
            emitReceipt(.unattributable, at: arrival, content: check, context: context)
            return
        }
        emitReceipt(nonce.attribution, at: arrival, content: check, contentID: id, context: context)
        if case .this = nonce { poolForProbes(id, recipient: recipient, context: context) }
        if plan.probe { await probeForeignRead(step, context) }
    }

    /// Judges a rich push by the id it names and the recipient the content is served to; with
    /// `rich_content: echo`, also by the bytes, which then must name the send and recipient.
    private func fetchRich(_ id: String, nonce: Nonce?, step: APIStep, arrival: Arrival, context: RunContext) async {
        let fetched: (text: String?, at: Int64)
        switch await fetch(id, step: step, trace: arrival.trace, context: context) {
        case .success(let answer): fetched = answer
        case .failure(let failure):
            emitReceipt(nonce?.attribution ?? .content(id), at: arrival, content: .failed(reason: failure.reason), contentID: id, context: context)
            return
        }
        let check = DeliveryLedger.ContentCheck.fetched(at: fetched.at)
        guard context.spec.scenario.richContent == .echo else {
            emitReceipt(nonce?.attribution ?? .content(id), at: arrival, content: check, contentID: id, context: context)
            return
        }
        // The image a run sends is the bytes `pf:<run>:<send>:<recipient>`.
        guard let text = fetched.text, let (echoed, recipient) = PushContent.parseSecurePayload(text, run: context.spec.runID),
            nonce == nil || echoed == nonce
        else {
            emitReceipt(.unattributable, at: arrival, content: check, context: context)
            return
        }
        emitReceipt(echoed.attribution, at: arrival, content: check, contentID: id, context: context)
        if case .this = echoed { poolForProbes(id, recipient: recipient, context: context) }
    }

    /// Offers a fetched id to the leak probes under its recipient (who may not be this device's
    /// user: a misdelivered push's content names its true owner, whose own read is no leak).
    private func poolForProbes(_ id: String, recipient: String, context: RunContext) {
        guard context.spec.scenario.leakProbeShare > 0 else { return }
        let owner = recipient == userName ? plan.user : context.spec.names.userIndex(recipient, users: context.spec.plan.users)
        if let owner { context.signals.probes.add(id: id, user: owner) }
    }

    /// A leak probe's read: fetch a notification that belongs to someone else. Only a refusal is right.
    private func probeForeignRead(_ step: APIStep, _ context: RunContext) async {
        guard let id = context.signals.probes.foreign(to: plan.user, pick: stableHash("\(plan.index)-\(context.now())")) else { return }
        var values = context.values(for: self, slots: keptValues)
        values.id = id
        let result = await context.runStep(step, values: values, http: client(context), timeout: context.spec.scenario.timeouts.fetch, record: false)
        if result.succeeded, let end = result.end {
            context.emit(.probeLeak(.init(device: plan.index, time: end, detail: "probe read another user's notification \(id)")))
            context.emit(.error(.probeForeignRead, at: end))
        }
    }
}
