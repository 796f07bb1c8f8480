/// The body of `PUT /api/register/{id}`, with the seed's capitalised keys.
public struct DeviceRegistration: Codable, Sendable, Equatable {
    public var platform: String
    public var handle: String
    public var tags: [String]?

    public init(platform: String, handle: String, tags: [String]? = nil) {
        self.platform = platform
        self.handle = handle
        self.tags = tags
    }

    enum CodingKeys: String, CodingKey {
        case platform = "Platform"
        case handle = "Handle"
        case tags = "Tags"
    }
}

/// A stored secure notification as `GET /api/notifications/{id}` returns it.
public struct SecureNotification: Codable, Sendable, Equatable {
    public var id: String
    public var payload: String
    public var read: Bool

    public init(id: String, payload: String, read: Bool) {
        self.id = id
        self.payload = payload
        self.read = read
    }

    enum CodingKeys: String, CodingKey {
        case id = "Id"
        case payload = "Payload"
        case read = "Read"
    }
}

/// The body of `POST /api/notifications/rich` when the caller supplies the content.
/// A bare JSON string body is also accepted: it is the message, with the built-in image.
public struct RichNotificationRequest: Codable, Sendable, Equatable {
    public var message: String
    /// Base64 of the image bytes.
    public var image: String?
    public var contentType: String?

    public init(message: String, image: String? = nil, contentType: String? = nil) {
        self.message = message
        self.image = image
        self.contentType = contentType
    }
}

/// The answer to every send call: the hub's outcome, as the seed's rule reads it.
public struct SendOutcome: Codable, Sendable, Equatable {
    public enum State: String, Codable, Sendable {
        /// At least one push service accepted the notification.
        case completed = "Completed"
        /// No live registration carries the tag (the seed's rule answers 200).
        case noTargetFound = "NoTargetFound"
        /// Targets existed and no push service accepted it (answered 500).
        case abandoned = "Abandoned"
        /// A notification hub took the send to fan out (its own outcome for a send).
        case enqueued = "Enqueued"
    }

    public var outcome: State
    /// Registrations the send was addressed to.
    public var targets: Int
    /// Pushes the push service accepted.
    public var accepted: Int
    /// Pushes that failed for good (after retries).
    public var failed: Int
    /// Registrations removed because the push service answered Unregistered.
    public var removed: Int
    /// The stored notification's id, for secure and rich sends.
    public var id: String?

    public init(outcome: State, targets: Int, accepted: Int, failed: Int, removed: Int, id: String? = nil) {
        self.outcome = outcome
        self.targets = targets
        self.accepted = accepted
        self.failed = failed
        self.removed = removed
        self.id = id
    }
}

/// The answer to `POST /api/login`.
public struct LoginResponse: Codable, Sendable, Equatable {
    public var token: String
    public var tokenType: String
    /// Seconds until the token expires.
    public var expiresIn: Int

    public init(token: String, tokenType: String = "Bearer", expiresIn: Int) {
        self.token = token
        self.tokenType = tokenType
        self.expiresIn = expiresIn
    }
}

/// Counters of the reference backend (`GET /stats`), totals since start.
public struct BackendStats: Codable, Sendable, Equatable {
    public var registrations: Int = 0
    public var storedNotifications: Int = 0
    /// Requests made to the push service, retries included.
    public var pnsRequests: Int = 0
    public var pnsAccepted: Int = 0
    public var pnsRetried: Int = 0
    public var pnsFailed: Int = 0
    /// Registrations removed because the push service answered Unregistered.
    public var feedbackRemoved: Int = 0
    /// Calls refused because the store was full (507): its own limits, or no space left.
    public var storeFull: Int = 0
    /// Calls refused because the store could not be reached, or its file vanished (503).
    public var storeUnreachable: Int = 0
    /// The store's failure now (`store_full`, `store_limit`, `store_unreachable`), nil while it works.
    public var storeProblem: String?

    public init() {}
}
