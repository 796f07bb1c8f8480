import Foundation
import Synchronization

/// The hub's registrations (and the installations that expand to them), with the tag and
/// handle indexes that make a tagged send and a query by channel cost what they select.
///
/// Every registration expires `registrationTTL` after its last create or update (never when
/// nil), as the hub's time to live says. Counts are bounded (``Limits``): past them a create is
/// refused as the service refuses it (403, quota exceeded). Times are wall-clock nanoseconds.
public final class HubStore: Sendable {
    public struct Limits: Sendable {
        public var maxRegistrations = 1_000_000
        public var maxInstallations = 500_000
        /// Tags on one registration (the service's limit).
        public var maxTags = 60
        public var maxTemplatesPerInstallation = 10
        /// A template body, and a registration's `PushVariables`.
        public var maxTemplateBytes = 64 * 1024

        public init() {}
    }

    public enum Failure: Error, Equatable, CustomStringConvertible {
        case notFound
        /// An `If-Match` that does not name the current ETag.
        case preconditionFailed
        /// The id was issued by this hub and has expired unused or since its last update.
        case gone
        case quotaExceeded(String)
        case invalid(String)

        public var description: String {
            switch self {
            case .notFound: "the registration does not exist"
            case .preconditionFailed: "the ETag does not match the registration's"
            case .gone: "the registration has expired"
            case .quotaExceeded(let what): "quota exceeded: \(what)"
            case .invalid(let why): why
            }
        }
    }

    /// An `If-Match` header: a wildcard or one ETag (`*`, `"*"`, `"3"`, `W/"3"`).
    public enum ETagCondition: Sendable, Equatable {
        case any
        case etag(Int)

        public init?(header: String) {
            var text = header.trimmingCharacters(in: .whitespaces)
            if text.hasPrefix("W/") { text.removeFirst(2) }
            text = text.trimmingCharacters(in: CharacterSet(charactersIn: "\""))
            if text == "*" {
                self = .any
            } else if let value = Int(text) {
                self = .etag(value)
            } else {
                return nil
            }
        }

        func holds(for registration: HubRegistration) -> Bool {
            switch self {
            case .any: true
            case .etag(let value): registration.etag == value
            }
        }
    }

    /// Which registrations a query returns.
    public enum Filter: Sendable, Equatable {
        case all
        /// `$filter=ChannelUri eq '…'` (or `DeviceToken`, `GcmRegistrationId`, …): any platform's handle.
        case handle(String)
        case tag(String)
    }

    struct State {
        var registrations: [String: HubRegistration] = [:]
        var byTag: [String: Set<String>] = [:]
        var byHandle: [String: Set<String>] = [:]
        var installations: [String: Installation] = [:]
        /// Registration ids each installation expanded to.
        var installationRegistrations: [String: [String]] = [:]
        var serial: UInt64 = 0

        mutating func insert(_ registration: HubRegistration) {
            if let old = registrations.updateValue(registration, forKey: registration.id) { unindex(old) }
            for tag in registration.tags { byTag[tag, default: []].insert(registration.id) }
            byHandle[registration.handleKey, default: []].insert(registration.id)
        }

        @discardableResult
        mutating func remove(_ id: String) -> HubRegistration? {
            guard let old = registrations.removeValue(forKey: id) else { return nil }
            unindex(old)
            return old
        }

        private mutating func unindex(_ registration: HubRegistration) {
            for tag in registration.tags {
                byTag[tag]?.remove(registration.id)
                if byTag[tag]?.isEmpty == true { byTag[tag] = nil }
            }
            byHandle[registration.handleKey]?.remove(registration.id)
            if byHandle[registration.handleKey]?.isEmpty == true { byHandle[registration.handleKey] = nil }
        }

        /// The registration unless it has expired (an expired one is removed).
        mutating func live(_ id: String, now: Int64) -> HubRegistration? {
            guard let registration = registrations[id] else { return nil }
            if let expiresAt = registration.expiresAt, expiresAt <= now {
                remove(id)
                return nil
            }
            return registration
        }
    }

    let state = Mutex(State())
    public let limits: Limits
    /// Nil: registrations never expire.
    public let registrationTTL: Duration?
    /// Distinguishes this hub's ids from another run's.
    private let idPrefix = String(UInt64.random(in: 1_000_000_000_000_000_000...UInt64(Int64.max)))

    public init(limits: Limits = .init(), registrationTTL: Duration? = nil) {
        self.limits = limits
        self.registrationTTL = registrationTTL
    }

    public var count: Int { state.withLock { $0.registrations.count } }

    // MARK: Registrations

    /// `POST …/registrationIDs`: a new id, stored nowhere until a registration is put at it.
    /// It carries its issue time (seconds), so a later PUT can tell an expired id (410).
    public func newRegistrationID(now: Int64) -> String {
        let serial = state.withLock {
            $0.serial += 1
            return $0.serial
        }
        return "\(idPrefix)-\(now / 1_000_000_000)-\(serial)"
    }

    /// `PUT …/registrations/{id}`: creates or replaces. With `ifMatch` (an update), the
    /// registration must exist and match.
    public func createOrUpdate(
        id: String,
        _ description: RegistrationXML.Description,
        ifMatch: ETagCondition?,
        now: Int64
    ) -> Result<HubRegistration, Failure> {
        if let problem = check(description) { return .failure(problem) }
        return state.withLock { state in
            let existing = state.live(id, now: now)
            if let ifMatch {
                guard let existing else { return .failure(.notFound) }
                guard ifMatch.holds(for: existing) else { return .failure(.preconditionFailed) }
            }
            if existing == nil {
                if isExpiredOwnID(id, now: now) { return .failure(.gone) }
                guard state.registrations.count < limits.maxRegistrations else {
                    return .failure(.quotaExceeded("the hub holds \(limits.maxRegistrations) registrations"))
                }
            }
            var registration = HubRegistration(
                id: id, platform: description.platform, handle: description.handle, tags: description.tags,
                pushVariables: description.pushVariables, secondaryTileName: description.secondaryTileName, template: description.template,
                browserKeys: description.browserKeys
            )
            registration.etag = (existing?.etag ?? 0) + 1
            registration.createdAt = existing?.createdAt ?? now
            registration.updatedAt = now
            registration.expiresAt = expiry(now)
            registration.installationID = existing?.installationID
            state.insert(registration)
            return .success(registration)
        }
    }

    /// `POST …/registrations`: a new registration with a new id.
    public func create(_ description: RegistrationXML.Description, now: Int64) -> Result<HubRegistration, Failure> {
        createOrUpdate(id: newRegistrationID(now: now), description, ifMatch: nil, now: now)
    }

    public func registration(_ id: String, now: Int64) -> HubRegistration? {
        state.withLock { $0.live(id, now: now) }
    }

    /// `DELETE …/registrations/{id}`.
    public func delete(id: String, ifMatch: ETagCondition?, now: Int64) -> Result<Void, Failure> {
        state.withLock { state in
            guard let existing = state.live(id, now: now) else { return .failure(.notFound) }
            if let ifMatch, !ifMatch.holds(for: existing) { return .failure(.preconditionFailed) }
            state.remove(id)
            return .success(())
        }
    }

    /// A page of registrations in id order, and the continuation token of the next page.
    public func query(_ filter: Filter, top: Int, continuation: String?, now: Int64) -> (page: [HubRegistration], next: String?) {
        state.withLock { state in
            let ids: [String]
            switch filter {
            case .all: ids = Array(state.registrations.keys)
            case .tag(let tag): ids = Array(state.byTag[tag] ?? [])
            case .handle(let handle):
                ids = Array((state.byHandle[handle] ?? []).union(state.byHandle[handle.lowercased()] ?? []))
            }
            var page: [HubRegistration] = []
            var next: String?
            for id in ids.sorted() where continuation.map({ id > $0 }) ?? true {
                guard let registration = state.live(id, now: now) else { continue }
                if case .handle(let handle) = filter, registration.handleKey != HubRegistration.handleKey(handle, platform: registration.platform) {
                    continue
                }
                if page.count == top {
                    next = page.last?.id
                    break
                }
                page.append(registration)
            }
            return (page, next)
        }
    }

    // MARK: Sends

    /// Registrations a send reaches: native ones of `platform`, or template ones of every
    /// platform when `platform` is nil; all of them without an expression.
    public func targets(platform: HubPlatform?, expression: TagExpression?, now: Int64) -> [HubRegistration] {
        state.withLock { state in
            var candidates: [String]
            if let expression, !expression.matchesUntagged {
                var union = Set<String>()
                for tag in expression.tags { union.formUnion(state.byTag[tag] ?? []) }
                candidates = Array(union)
            } else {
                candidates = Array(state.registrations.keys)
            }
            candidates.sort()
            var result: [HubRegistration] = []
            for id in candidates {
                guard let registration = state.live(id, now: now) else { continue }
                let kindMatches = platform.map { registration.template == nil && registration.platform == $0 } ?? (registration.template != nil)
                guard kindMatches, expression?.matches(registration.tagSet) ?? true else { continue }
                result.append(registration)
            }
            return result
        }
    }

    /// The push service said the handle is dead: every registration of it goes, and the
    /// installations holding it are marked expired, as the service does.
    @discardableResult
    public func removeExpiredHandle(_ handle: String, platform: HubPlatform) -> Int {
        state.withLock { state in
            let key = HubRegistration.handleKey(handle, platform: platform)
            var removed = 0
            for id in state.byHandle[key] ?? [] {
                guard let registration = state.registrations[id], registration.platform == platform else { continue }
                state.remove(id)
                removed += 1
                if let installation = registration.installationID {
                    state.installations[installation]?.pushChannelExpired = true
                    state.installationRegistrations[installation]?.removeAll { $0 == id }
                }
            }
            return removed
        }
    }

    // MARK: Helpers

    func check(_ description: RegistrationXML.Description) -> Failure? {
        guard description.tags.count <= limits.maxTags else {
            return .invalid("a registration may have at most \(limits.maxTags) tags, this one has \(description.tags.count)")
        }
        guard (description.template?.body.utf8.count ?? 0) <= limits.maxTemplateBytes,
            (description.pushVariables?.utf8.count ?? 0) <= limits.maxTemplateBytes
        else { return .invalid("the template or PushVariables is over \(limits.maxTemplateBytes) bytes") }
        return nil
    }

    func expiry(_ now: Int64) -> Int64? {
        registrationTTL.map { now &+ Int64($0.components.seconds) &* 1_000_000_000 }
    }

    /// An id this hub issued (`{prefix}-{seconds}-{serial}`) whose time to live has passed.
    private func isExpiredOwnID(_ id: String, now: Int64) -> Bool {
        guard let registrationTTL else { return false }
        let parts = id.split(separator: "-")
        guard parts.count == 3, parts[0] == idPrefix, let issued = Int64(parts[1]) else { return false }
        return issued + registrationTTL.components.seconds <= now / 1_000_000_000
    }
}
