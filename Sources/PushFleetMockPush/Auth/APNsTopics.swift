import SwiftASN1
import X509

/// Which `apns-topic` values a sender may use: the bundle ids it is allowed, each alone or with
/// the suffix Apple gives a push type's topic.
enum APNsTopics {
    /// Suffixes Apple defines for push types' topics (`<bundle id>.voip`, …).
    static let suffixes = [
        ".voip", ".complication", ".pushkit.fileprovider", ".location-query", ".voip-ptt", ".push-type.liveactivity",
        ".push-type.widgets",
    ]

    /// Whether `topic` is one of `bundles` (an empty list allows any), alone or suffixed.
    static func isAllowed(_ topic: String, bundles: [String]) -> Bool {
        bundles.isEmpty || bundles.contains { bundle in topic == bundle || suffixes.contains { topic == bundle + $0 } }
    }

    /// The bundle ids a provider certificate is for: its subject's UID, as in Apple's push
    /// certificates. A certificate without one (a test certificate) is allowed any topic.
    static func bundles(ofCertificate der: [UInt8]) -> [String]? {
        guard let certificate = try? Certificate(derEncoded: der) else { return nil }
        let uid: ASN1ObjectIdentifier = [0, 9, 2342, 19_200_300, 100, 1, 1]
        var bundles: [String] = []
        for rdn in certificate.subject {
            for attribute in rdn where attribute.type == uid {
                bundles.append(String(describing: attribute.value))
            }
        }
        return bundles
    }
}
