import Foundation
import Hummingbird
import PushFleetServerSupport
import PushFleetWire

/// `/admin/*`: counters, fault knobs and forced disconnects, for scenarios and tests. With a
/// token, every call needs `Authorization: Bearer <token>` (401 otherwise): anyone who can reach
/// the port could otherwise stop every delivery.
struct AdminEndpoint {
    let service: PushService
    let token: String?
    /// The gateway ports' device caps, for the stats.
    var deviceSlots: [DeviceSlots] = []
    var loopLoad: LoopLoadMonitor? = nil

    func register(on router: Router<BasicRequestContext>) {
        router.get("/health") { _, _ in "ok" }
        router.get("/admin/stats") { request, _ in
            try authorize(request)
            return Response.json(stats())
        }
        router.get("/admin/faults") { request, _ in
            try authorize(request)
            return Response.json(service.faultSettings)
        }
        router.put("/admin/faults") { request, context -> Response in
            try authorize(request)
            let settings = try await decode(FaultSettings.self, from: request)
            let problems = settings.problems()
            guard problems.isEmpty else {
                throw HTTPError(.badRequest, message: problems.joined(separator: "; "))
            }
            service.replaceFaults(with: settings)
            return .json(settings)
        }
        router.post("/admin/disconnect") { request, context -> Response in
            try authorize(request)
            let disconnect = try await decode(DisconnectRequest.self, from: request)
            if let ratio = disconnect.ratio, !(0...1).contains(ratio) {
                throw HTTPError(.badRequest, message: "ratio must be between 0 and 1, got \(ratio)")
            }
            return .json(DisconnectResult(disconnected: service.forceDisconnect(disconnect)))
        }
    }

    private func stats() -> PushServiceStats {
        var stats = service.stats()
        let caps = deviceSlots.map(\.snapshot)
        stats.deviceCap = caps.reduce(0) { $0 + $1.cap }
        stats.deviceSockets = caps.reduce(0) { $0 + $1.held }
        stats.deviceCapRefused = caps.reduce(0) { $0 + $1.refused }
        stats.deviceCapReached = caps.reduce(0) { $0 + $1.episodes }
        stats.loops = loopLoad?.snapshot
        stats.process = loopLoad?.process
        return stats
    }

    private func authorize(_ request: Request) throws {
        guard let token else { return }
        let given = request.headers[.authorization] ?? ""
        guard given.hasPrefix("Bearer "), Self.constantTimeEqual(Array(given.utf8.dropFirst(7)), Array(token.utf8)) else {
            throw HTTPError(.unauthorized, headers: [.wwwAuthenticate: "Bearer realm=\"pushfleet-admin\""], message: "the admin API needs its token")
        }
    }

    /// Compares without stopping at the first difference, so timing does not reveal a prefix.
    static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        var difference = UInt8(truncatingIfNeeded: a.count ^ b.count)
        for index in 0..<max(a.count, b.count) {
            difference |= (index < a.count ? a[index] : 0) ^ (index < b.count ? b[index] : 0)
        }
        return difference == 0
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
