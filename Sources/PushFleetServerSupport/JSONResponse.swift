public import Foundation
public import HTTPTypes
public import Hummingbird
import NIOCore

/// Encoders shared by the servers' handlers. Both are thread-safe for use from many requests.
public enum ServerJSON {
    public static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }()
    public static let decoder = JSONDecoder()
}

extension Response {
    /// A response whose body is `value` as JSON.
    public static func json(
        _ value: some Encodable,
        status: HTTPResponse.Status = .ok,
        headers: HTTPFields = [:]
    ) -> Response {
        let data = (try? ServerJSON.encoder.encode(value)) ?? Data("{}".utf8)
        return .bytes(data, status: status, headers: headers, contentType: "application/json")
    }

    /// A response with a raw body and content type.
    public static func bytes(
        _ data: some Collection<UInt8>,
        status: HTTPResponse.Status = .ok,
        headers: HTTPFields = [:],
        contentType: String
    ) -> Response {
        Response(status: status, headers: headers.with(contentType: contentType), body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }

    /// A response with no body.
    public static func empty(status: HTTPResponse.Status = .ok, headers: HTTPFields = [:]) -> Response {
        Response(status: status, headers: headers, body: .init())
    }
}

extension Request {
    /// Collects the body, or returns nil when it is longer than `limit` bytes.
    ///
    /// Returning nil (instead of throwing Hummingbird's generic 413) lets each protocol answer
    /// an oversized body in its own error format.
    public mutating func collectBody(limit: Int) async throws -> ByteBuffer? {
        do {
            return try await collectBody(upTo: limit)
        } catch let error as HTTPError where error.status == .contentTooLarge {
            return nil
        }
    }
}

extension ByteBuffer {
    /// The readable bytes as `Data`.
    public var data: Data { Data(readableBytesView) }
}

extension CompleteResponse {
    /// `value` as JSON.
    public static func json(_ value: some Encodable, status: HTTPResponse.Status = .ok, headers: HTTPFields = [:]) -> CompleteResponse {
        let data = (try? ServerJSON.encoder.encode(value)) ?? Data("{}".utf8)
        return bytes(data, status: status, headers: headers, contentType: "application/json")
    }

    /// A raw body and its content type. Inlinable: the backend answers with it per request, from
    /// another module, and the buffer's copy is then made for the caller's collection.
    @inlinable
    public static func bytes(
        _ data: some Collection<UInt8>, status: HTTPResponse.Status = .ok, headers: HTTPFields = [:], contentType: String
    ) -> CompleteResponse {
        CompleteResponse(status: status, headers: headers.with(contentType: contentType), body: ByteBuffer(bytes: data))
    }

    /// No body.
    public static func empty(status: HTTPResponse.Status = .ok, headers: HTTPFields = [:]) -> CompleteResponse {
        CompleteResponse(status: status, headers: headers)
    }

    /// The same response for the router.
    public var response: Response {
        // An empty buffer would still be written as a body chunk (an empty DATA frame on HTTP/2).
        Response(status: status, headers: headers, body: body.readableBytes == 0 ? .init() : .init(byteBuffer: body))
    }
}

extension HTTPFields {
    @usableFromInline
    static let json: HTTPFields = [.contentType: "application/json"]

    /// These fields with `contentType`: an answer with no other field (most) gets it appended, as
    /// setting it by name goes through the fields' generic replacement.
    @usableFromInline
    func with(contentType: String) -> HTTPFields {
        // The backend's answers, one or two a push: fields shared, not made.
        if isEmpty, contentType == "application/json" { return Self.json }
        var fields = self
        if fields.isEmpty {
            fields.append(HTTPField(name: .contentType, value: contentType))
        } else {
            fields[.contentType] = contentType
        }
        return fields
    }
}
