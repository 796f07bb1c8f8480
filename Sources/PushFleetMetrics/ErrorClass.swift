import PushFleetCore

/// A class of runtime error, as errors.csv, the time series and the live metrics group them:
/// `operation:reason`, drawn from a bounded set (an operation of the api description, a status,
/// a transport failure class), never from an error's text.
package struct ErrorClass: Sendable, Hashable, CustomStringConvertible {
    /// The label the reports show.
    package let label: String

    private init(_ label: String) { self.label = label }

    package var description: String { label }

    /// A class as a file recorded it (an event tape replayed by a merge).
    package static func recorded(_ label: String) -> Self { Self(label) }

    /// An answer the step did not expect.
    package static func status(_ operation: String, _ status: Int) -> Self { Self("\(operation):status_\(status)") }

    /// No answer, or a request that could not be made; `reason` is a bounded class (`timeout`,
    /// `connect`, `unset_variable` …).
    package static func failed(_ operation: String, _ reason: String) -> Self { Self("\(operation):\(reason)") }

    /// A device's own gateway socket could not be opened.
    package static func connect(_ reason: String) -> Self { failed("connect", reason) }

    /// A device's own socket was refused because the push service holds all the device sockets
    /// it takes (its 503 names the cap; the run's marker ``deviceCapMarker(_:)`` repeats it).
    package static let connectAtCapacity = connect("at_capacity")

    /// The run's marker when the push service first refuses a device at its cap.
    package static func deviceCapMarker(_ cap: Int) -> String { "\(deviceCapMarkerPrefix) \(cap.grouped) devices" }
    package static let deviceCapMarkerPrefix = "push service at its connection cap of"


    /// A device on the shared channel was not confirmed online in time.
    package static let connectTimeout = connect("timeout")

    /// The multiplexed gateway connection failed.
    package static func gateway(_ reason: String) -> Self { failed("gateway", reason) }

    /// A frame from the gateway that is not one of its frames.
    package static let gatewayBadFrame = gateway("bad_frame")

    /// The gateway said a command of ours was wrong.
    package static let gatewayErrorNotice = gateway("error_notice")

    /// A backend that lost a registration: the device had to register anew (`status` is what
    /// made it).
    package static func renewedAfter(_ status: Int) -> Self { Self("register:renewed_after_\(status)") }

    /// A leak probe read a notification that was not the prober's.
    package static let probeForeignRead = Self("probe:foreign_read_succeeded")

    /// The backend accepted a registration tag that names another user.
    package static let probeTagSpoof = Self("probe:tag_spoof_accepted")

    /// The push service refused a push of the run (`pns:apns:403:InvalidProviderToken`); its
    /// reason is part of the class when it is a code (one word of letters, digits and `_`, at
    /// most 64 characters), not a sentence (WNS describes its refusals in words).
    package static func pushService(platform: String, status: Int, reason: String) -> Self {
        let isCode = (1...64).contains(reason.count) && reason.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") }
        let safePlatform = platform.allSatisfy { $0.isASCII && $0.isLetter } ? platform : "other"
        return Self("pns:\(safePlatform):\(status)" + (isCode ? ":\(reason)" : ""))
    }

    /// The embedded backend could not listen again after a restart fault.
    package static let backendRestartFailed = Self("fault:backend_restart_failed")
}
