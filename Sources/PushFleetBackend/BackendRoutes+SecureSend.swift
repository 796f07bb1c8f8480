import Foundation
import Hummingbird
import HummingbirdCore
import NIOCore
import PushFleetCore
import PushFleetServerSupport
import PushFleetWire
import W3CTraceContext

extension BackendRoutes {
    static let securePath = "/api/notifications/secure"

    /// `POST /api/notifications/secure`, with or without a query.
    static func isSecureSend(_ head: HTTPRequest) -> Bool {
        isPost(head, to: securePath)
    }
}

extension ReferenceBackend {
    /// The secure send's answer from the event loop that read it, when nothing before the push
    /// needs waiting: the checks, the store's read and write, as the router's route makes them;
    /// then the pushes, whose answer completes the future. Taken under the same conditions as
    /// ``fetchAtOnce(id:authorization:)``, and with no hub to send through; anything the router
    /// would refuse (a bad body, an unknown recipient, a full store) goes to the router, which
    /// refuses it as before. The router's task, its trie and its response writer cost more than
    /// the send's own work at a few thousand sends a second (docs/performance.md).
    func secureSendLater(head: HTTPRequest, body: ByteBuffer, on loop: any EventLoop) -> EventLoopFuture<CompleteResponse>? {
        guard !configuration.faults.isActive, configuration.spans == nil, hubSender == nil, let store = storeHandle.memory,
            body.readableBytes <= configuration.limits.maxBodyBytes, let user = knownCaller(head.headerFields.value(of: .authorization)),
            let (recipient, recipientTag) = try? recipientAndTag(Self.toTag(inTarget: head.path ?? ""), default: user),
            let payload = Self.secureText(body)
        else { return nil }
        let now = configuration.clock()
        sweepIfDue(now: now, store: store)
        let found = store.targets(tag: recipientTag, now: now)
        storeSucceeded(writes: false)
        // Nothing is stored for a user with no device to tell: it could only be read by id.
        guard !found.isEmpty else { return loop.makeSucceededFuture(Self.answer(for: .noTarget)) }
        guard let stored = try? store.createNotification(sender: user, recipient: recipient, content: .secure(payload: payload), now: now)
        else { return nil }
        storeSucceeded(writes: true)
        // Most users' devices are all pushable: their list is kept, not filtered into a new one.
        let pushable = { (target: RegistrationStore.Registration) in Platform.pushable.contains(target.platform!) }
        let targets = found.allSatisfy(pushable) ? found : found.filter(pushable)
        let caller = CallerTrace(head)
        let promise = loop.makePromise(of: CompleteResponse.self)
        if targets.count == 1, pushAtOnce(targets[0], id: stored.id, trace: caller, store: store, on: loop, promise) {
            return promise.futureResult
        }
        promise.completeWithTask {
            await TracePropagation.$current.withValue(caller.context) {
                var outcome = await self.push(to: targets, store: store) { platform in
                    NativeNotification.secure(platform: platform, id: stored.id)
                }
                outcome.id = stored.id
                return Self.answer(for: outcome)
            }
        }
        return promise.futureResult
    }

    /// The push to one device, its first attempt made from the event loop with no task when it
    /// can be (``PushSender/startFirstAttempt(_:to:trace:preferring:done:)``); further
    /// attempts, when its answer asks for them, in a task. False when it could not begin.
    private func pushAtOnce(
        _ target: RegistrationStore.Registration, id: String, trace: CallerTrace, store: MemoryStore, on loop: any EventLoop,
        _ promise: EventLoopPromise<CompleteResponse>
    ) -> Bool {
        guard let notification = NativeNotification.secure(platform: target.platform!, id: id), let handle = target.handle else { return false }
        @Sendable func answer(_ result: PushSender.Result) -> CompleteResponse {
            var removed = 0
            // Dead whether this send removes it or a concurrent send to the same user did.
            if result == .unregistered, store.removeDead(id: target.id, handle: handle) {
                removed = 1
                counters.update { $0.feedbackRemoved += 1 }
            }
            var outcome = Self.outcome([result], removed: removed)
            outcome.id = id
            return Self.answer(for: outcome)
        }
        return sender.startFirstAttempt(notification, to: handle, trace: trace.headers, preferring: loop) { step in
            switch step {
            case .done(let result):
                promise.succeed(answer(result))
            case .again(let lastFailure):
                promise.completeWithTask {
                    let result = await TracePropagation.$current.withValue(trace.context) {
                        await self.sender.send(notification, to: handle, from: 1, lastFailure: lastFailure)
                    }
                    return answer(result)
                }
            }
        }
    }

    /// The query's `to_tag` (``queryValue(_:inTarget:)``).
    static func toTag(inTarget target: String) -> Substring? {
        queryValue("to_tag", inTarget: target)
    }

    /// The secure send's body, a JSON string; nil when it is not one.
    static func secureText(_ body: ByteBuffer) -> String? {
        body.withUnsafeReadableBytes(PlainJSONString.read) ?? (try? ServerJSON.decoder.decode(String.self, from: Data(body.readableBytesView)))
    }

    /// The caller's W3C Trace Context as its headers came, read as ``TraceContextMiddleware``
    /// reads it for the router.
    struct CallerTrace: Sendable {
        var parent: String?
        var state: String?

        init(_ head: HTTPRequest) {
            parent = head.headerFields.value(of: .traceparent)
            let state = head.headerFields.contains(.tracestate) ? head.headerFields[values: .tracestate].joined(separator: ",") : ""
            self.state = state.isEmpty ? nil : state
        }

        /// Made when a task needs it (a retry, several devices): the first attempt needs only
        /// the headers.
        var context: TraceContext? {
            guard let parent else { return nil }
            return try? TraceContext(traceParentHeaderValue: parent, traceStateHeaderValue: state)
        }

        /// The headers that hand the context on. With no `tracestate`, the `traceparent` is
        /// checked by ``TraceIdentity``, which takes exactly what the library takes (version
        /// `00`, 55 bytes, lowercase hex, non-zero ids) with no copy of the text: every send asks.
        var headers: [(String, String)] {
            guard let parent else { return [] }
            guard state != nil else { return TraceIdentity(traceparent: parent) == nil ? [] : [("traceparent", parent)] }
            return TracePropagation.headers(for: context, parent: parent)
        }
    }
}
