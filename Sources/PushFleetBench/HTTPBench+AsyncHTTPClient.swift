import AsyncHTTPClient
import Foundation
import NIOCore
import NIOPosix
import PushFleetCore
import PushFleetEngine

extension HTTPBench {
    /// AsyncHTTPClient under the fleet client's load (same GETs, connections and duration), so
    /// the reason the fleet has its own HTTP/1.1 pool is a figure `bench http` reproduces.
    func measureAsyncHTTPClient(port: Int, seconds: Double) async throws -> HTTPMeasurement {
        // As the fleet rows do, the window includes the client's setup and shutdown.
        let before = CPUTime.own()
        let started = Date()
        var configuration = HTTPClient.Configuration()
        configuration.connectionPool = .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: connections)
        let client = HTTPClient(eventLoopGroup: MultiThreadedEventLoopGroup.singleton, configuration: configuration)
        let request = HTTPClientRequest(url: "http://127.0.0.1:\(port)/")
        let deadline = MonotonicClock.nanoseconds() + Int64(seconds * 1e9)
        let answered = await withTaskGroup(of: Int.self) { tasks in
            for _ in 0..<connections {
                tasks.addTask {
                    var done = 0
                    while MonotonicClock.nanoseconds() < deadline {
                        // The whole body read, as the fleet's pool does, before the connection is reused.
                        if let response = try? await client.execute(request, timeout: .seconds(5)),
                            (try? await response.body.collect(upTo: 1 << 20)) != nil
                        {
                            done += 1
                        }
                    }
                    return done
                }
            }
            return await tasks.reduce(0, +)
        }
        try await client.shutdown()
        return HTTPMeasurement(
            tool: "AsyncHTTPClient (Swift's pool)", requests: Double(answered), cpu: CPUTime.own() - before, wall: Date().timeIntervalSince(started)
        )
    }
}
