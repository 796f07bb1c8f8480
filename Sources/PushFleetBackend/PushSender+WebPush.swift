import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import PushFleetWebPush
import PushFleetWire

/// Web Push from the reference backend: the handle is the browser's subscription JSON; the
/// payload is encrypted for its keys (RFC 8291, aes128gcm) and the request signed with the
/// backend's VAPID key (RFC 8292), whose public half browsers subscribe with.
extension PushSender {
    /// Web Push hosts a subscription's endpoint may name; the push resource is posted to the
    /// push service's own host, as hosts entries would send it there.
    static let webPushHosts = ["fcm.googleapis.com", "updates.push.services.mozilla.com", "web.push.apple.com"]

    func webPushPost(_ notification: NativeNotification, handle: String, base: String) throws -> ProviderPost {
        let parsed: (subscription: WebPushSubscription, endpoint: URL, recipient: WebPushRecipient)
        do { parsed = try WebPushSubscription.parse(handle) } catch {
            throw RequestError(description: "the Web Push subscription is unusable: \(error)", handleIsUnusable: true)
        }
        let url = try Self.pushResource(parsed.endpoint, base: base)
        let payload = notification.bodyJSON
        let sealed: WebPushCiphertext
        do { sealed = try WebPushEncryption.encrypt(payload, for: parsed.recipient) } catch {
            throw RequestError(description: "Web Push encryption failed: \(error)", handleIsUnusable: true)
        }
        guard let target = URL(string: url) else { throw RequestError(description: "no URL for \(url)", handleIsUnusable: true) }
        let authorization: String
        // One header per audience, renewed hourly (12 h of life), as libraries that cache them send.
        do { authorization = try vapid.authorization(for: target, now: Int64(Date().timeIntervalSince1970)) } catch {
            throw RequestError(description: "VAPID signing failed: \(error)")
        }
        let headers = [
            ("authorization", authorization), ("ttl", "3600"), ("urgency", "normal"), ("content-encoding", sealed.encoding.rawValue),
            ("content-type", notification.contentType),
        ]
        return ProviderPost(path: String(url.dropFirst(base.count)), headers: headers, body: ByteBuffer(bytes: sealed.body))
    }

    /// The endpoint's path and query on the push service. Any other host is refused: posting to
    /// whatever URL a client registered would let any client make the backend send requests to
    /// hosts of its choosing.
    static func pushResource(_ endpoint: URL, base: String) throws -> String {
        guard let components = URLComponents(url: endpoint, resolvingAgainstBaseURL: false), let host = components.host?.lowercased(),
            components.user == nil, components.password == nil
        else { throw RequestError(description: "the endpoint is not a URL", handleIsUnusable: true) }
        let ownHost = URLComponents(string: base)?.host?.lowercased()
        guard webPushHosts.contains(host) || host.hasSuffix(".notify.windows.com") || host == ownHost else {
            throw RequestError(description: "the endpoint \(host) is not a Web Push service's", handleIsUnusable: true)
        }
        let path = components.percentEncodedPath
        let query = components.percentEncodedQuery.map { "?" + $0 } ?? ""
        guard !path.isEmpty, path.count + query.count <= 2048 else {
            throw RequestError(description: "the endpoint has no push resource", handleIsUnusable: true)
        }
        return base + path + query
    }
}
