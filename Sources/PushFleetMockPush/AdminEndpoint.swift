import Foundation
import Hummingbird
import PushFleetServerSupport
import PushFleetWire

/// `/admin/*`: counters, fault knobs and forced disconnects, for scenarios and tests.
struct AdminEndpoint {
    let service: PushService

    func register(on router: Router<BasicRequestContext>) {
        router.get("/health") { _, _ in "ok" }
        router.get("/admin/stats") { _, _ in Response.json(service.stats()) }
        router.get("/admin/faults") { _, _ in Response.json(service.faultSettings) }
        router.put("/admin/faults") { request, context -> Response in
            let settings = try await decode(FaultSettings.self, from: request)
            let problems = settings.problems()
            guard problems.isEmpty else {
                throw HTTPError(.badRequest, message: problems.joined(separator: "; "))
            }
            service.replaceFaults(with: settings)
            return .json(settings)
        }
        router.post("/admin/disconnect") { request, context -> Response in
            let disconnect = try await decode(DisconnectRequest.self, from: request)
            if let ratio = disconnect.ratio, !(0...1).contains(ratio) {
                throw HTTPError(.badRequest, message: "ratio must be between 0 and 1, got \(ratio)")
            }
            return .json(DisconnectResult(disconnected: service.forceDisconnect(disconnect)))
        }
    }

    private func decode<T: Decodable>(_ type: T.Type, from request: Request) async throws -> T {
        var request = request
        guard let body = try await request.collectBody(limit: 1024 * 1024) else {
            throw HTTPError(.contentTooLarge, message: "body over 1 MiB")
        }
        do {
            return try ServerJSON.decoder.decode(T.self, from: body.data)
        } catch {
            throw HTTPError(.badRequest, message: "invalid \(T.self) JSON: \(error)")
        }
    }
}
