import Foundation
import PushFleetWire
import Synchronization

/// A browser's subscription as the push service keeps it.
struct BrowserSubscription: Sendable {
    /// The VAPID key messages must be signed with, when the page gave one.
    var applicationServerKey: Data?
    /// Unsubscribed by the browser: the endpoint answers 410 for good.
    var unsubscribed = false
}

/// Web Push subscriptions: minted for a browser, looked up for each message, ended by the
/// browser (see WebPushEndpoint).
extension PushService {
    func subscribeWebPush(token: String, applicationServerKey: Data?) {
        let address = DeviceAddress(platform: .webpush, token: token)
        shard(for: address).devices.withLock { devices in
            var entry = devices[address] ?? DeviceEntry()
            entry.webPush = BrowserSubscription(applicationServerKey: applicationServerKey)
            entry.unregisteredAt = nil
            devices[address] = entry
        }
        counters.withLock { $0.webPushSubscriptions = ($0.webPushSubscriptions ?? 0) + 1 }
    }

    func webPushSubscription(token: String) -> BrowserSubscription? {
        let address = DeviceAddress(platform: .webpush, token: token)
        return shard(for: address).devices.withLock { $0[address]?.webPush }
    }

    /// Ends a subscription (its held message is discarded); false when there was none.
    func unsubscribeWebPush(token: String) -> Bool {
        let address = DeviceAddress(platform: .webpush, token: token)
        let known = shard(for: address).devices.withLock { devices in
            guard var entry = devices[address], entry.webPush != nil else { return false }
            entry.webPush?.unsubscribed = true
            devices[address] = entry
            return true
        }
        if known { unregister([address]) }
        return known
    }
}
