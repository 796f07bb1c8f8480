import Foundation
import PushFleetCore
import PushFleetServerSupport
import PushFleetWire
import Synchronization

/// The hub's registrations, with the tag index that makes a send to `username:U` cost
/// O(registrations of U).
///
/// A registration id is created empty (`POST /api/register`) and filled by `PUT`. Every id
/// expires `ttl` after its last create or update; an expired id is gone (410), which is what
/// sends the device's client logic down its retry path. Times are wall-clock nanoseconds.
final class RegistrationStore: Sendable {
    struct Registration: Sendable, Equatable {
        var id: String
        var owner: String
        var platform: Platform?
        var handle: String?
        var tags: Set<String>
        var expiresAt: Int64
    }

    enum UpdateResult: Equatable {
        case updated
        case gone
        case notOwner
    }

    private struct State {
        // Sharded: an entry per device, grown on the backend's loop (ShardedDictionary).
        var byID = ShardedDictionary<String, Registration>()
        /// Handle → ids, oldest first (the seed returns the first and deletes the rest).
        var byHandle = ShardedDictionary<String, [String]>()
        var byTag = ShardedDictionary<String, Set<String>>()
        var nextSerial: UInt64 = 0

        mutating func remove(_ id: String) {
            guard let registration = byID.removeValue(forKey: id) else { return }
            unindex(registration)
        }

        mutating func unindex(_ registration: Registration) {
            if let handle = registration.handle {
                byHandle[handle]?.removeAll { $0 == registration.id }
                if byHandle[handle]?.isEmpty == true { byHandle[handle] = nil }
            }
            for tag in registration.tags {
                byTag[tag]?.remove(registration.id)
                if byTag[tag]?.isEmpty == true { byTag[tag] = nil }
            }
        }

        mutating func index(_ registration: Registration) {
            if let handle = registration.handle { byHandle[handle, default: []].append(registration.id) }
            for tag in registration.tags { byTag[tag, default: []].insert(registration.id) }
        }

        /// The registration if it exists and has not expired; an expired one is removed.
        mutating func live(_ id: String, now: Int64) -> Registration? {
            guard let registration = byID[id] else { return nil }
            guard registration.expiresAt > now else {
                remove(id)
                return nil
            }
            return registration
        }
    }

    private let state = Mutex(State())
    let ttl: Duration
    let maxCount: Int
    private let idPrefix: String

    init(ttl: Duration, maxCount: Int = .max) {
        self.ttl = ttl
        self.maxCount = maxCount
        // Ids differ between backend runs, so a device cannot reuse an id from an earlier run.
        self.idPrefix = String(UInt32.random(in: 0...UInt32.max), radix: 36)
    }

    var count: Int { state.withLock { $0.byID.count } }

    /// `POST /api/register[?handle=H]`.
    ///
    /// With a handle, the seed returns the first registration already bound to it and deletes the
    /// others. Here only the caller's own registrations are reused; registrations of the same
    /// handle owned by someone else are deleted too, since the device now belongs to the caller.
    /// Nil when the store holds `maxCount` registrations already.
    func create(owner: String, handle: String?, now: Int64) -> String? {
        state.withLock { state in
            if let handle, let ids = state.byHandle[handle] {
                var kept: String?
                for id in ids {
                    guard let registration = state.live(id, now: now) else { continue }
                    if kept == nil && registration.owner == owner {
                        kept = id
                    } else {
                        state.remove(id)
                    }
                }
                if let kept {
                    state.byID[kept]?.expiresAt = now + ttl.nanosecondCount
                    return kept
                }
            }
            guard state.byID.count < maxCount else { return nil }
            state.nextSerial += 1
            let id = "\(idPrefix)-\(state.nextSerial)-\(String(UInt64.random(in: 0...UInt64.max), radix: 36))"
            state.byID[id] = Registration(id: id, owner: owner, platform: nil, handle: nil, tags: [], expiresAt: now + ttl.nanosecondCount)
            return id
        }
    }

    /// `PUT /api/register/{id}`: binds platform, handle and tags (the caller's user tag included).
    func update(id: String, owner: String, platform: Platform, handle: String, tags: Set<String>, now: Int64) -> UpdateResult {
        state.withLock { state in
            guard var registration = state.live(id, now: now) else { return .gone }
            guard registration.owner == owner else { return .notOwner }
            state.unindex(registration)
            registration.platform = platform
            registration.handle = handle
            registration.tags = tags
            registration.expiresAt = now + ttl.nanosecondCount
            state.byID[id] = registration
            state.index(registration)
            return .updated
        }
    }

    /// `DELETE /api/register/{id}`.
    func delete(id: String, owner: String, now: Int64) -> UpdateResult {
        state.withLock { state in
            guard let registration = state.live(id, now: now) else { return .gone }
            guard registration.owner == owner else { return .notOwner }
            state.remove(id)
            return .updated
        }
    }

    /// Live, complete registrations carrying `tag`, optionally of one platform.
    func targets(tag: String, platform: Platform?, now: Int64) -> [Registration] {
        state.withLock { state in
            guard let ids = state.byTag[tag] else { return [] }
            var result: [Registration] = []
            for id in ids {
                guard let registration = state.live(id, now: now), let registeredPlatform = registration.platform,
                    registration.handle != nil
                else { continue }
                if platform == nil || platform == registeredPlatform { result.append(registration) }
            }
            return result
        }
    }

    /// The push service's feedback: the handle is dead. Removes the registration unless it was
    /// re-bound to another handle since the send started.
    @discardableResult
    func removeDead(id: String, handle: String) -> Bool {
        state.withLock { state in
            guard state.byID[id]?.handle == handle else { return false }
            state.remove(id)
            return true
        }
    }

    func registration(id: String) -> Registration? {
        state.withLock { $0.byID[id] }
    }

    /// Drops every expired registration; returns how many.
    @discardableResult
    func sweep(now: Int64) -> Int {
        state.withLock { state in
            let expired = ExpirySweep.expired(in: state.byID, now: now) { $0.expiresAt }
            for id in expired { state.remove(id) }
            return expired.count
        }
    }
}

extension Duration {
    var nanosecondCount: Int64 {
        components.seconds * 1_000_000_000 + components.attoseconds / 1_000_000_000
    }
}
