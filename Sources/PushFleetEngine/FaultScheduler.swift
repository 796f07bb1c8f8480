import Foundation
import PushFleetClients
import PushFleetCore
import NIOCore
import NIOHTTP1
import PushFleetMetrics
import PushFleetWire

/// Applies the scenario's fault steps to the push service's admin API at their times.
struct FaultScheduler: Sendable {
    let steps: [Scenario.FaultStep]

    func run(_ context: RunContext, trafficStart: Int64) async {
        await withDiscardingTaskGroup { group in
            for step in steps.sorted(by: { $0.at < $1.at }) {
                guard await context.sleep(until: trafficStart + step.at.nanoseconds) else { return }
                await apply(step, context)
                if case .restart(let down) = step.backend {
                    // A restart lasts the down time and more: later steps do not wait for it.
                    group.addTask { await restart(down, context) }
                }
            }
        }
    }

    private func apply(_ step: Scenario.FaultStep, _ context: RunContext) async {
        let admin = BackendClient(baseURL: context.services.system.pushService, connections: 1, clock: context.clock)
        let authorization = context.services.system.pushAdminToken.map { "Bearer \($0)" }
        var labels: [String] = []
        if step.drop != nil || step.throttle != nil || step.latency != nil || step.unregisteredRatio != nil || step.serviceRate != nil {
            var settings = FaultSettings(seed: context.spec.scenario.seed)
            if case .success(let current) = await admin.exchange(.GET, "/admin/faults", authorization: authorization, timeout: .seconds(5)),
                let decoded = try? JSONDecoder().decode(FaultSettings.self, from: Data(current.body.readableBytesView))
            {
                settings = decoded
            }
            if let drop = step.drop { settings.drop = drop; labels.append("drop \(drop)") }
            if let throttle = step.throttle { settings.throttle = throttle; labels.append("throttle \(throttle)") }
            if let ratio = step.unregisteredRatio { settings.unregisteredRatio = ratio; labels.append("unregistered \(ratio)") }
            if let latency = step.latency {
                settings.latency = Self.distribution(latency)
                labels.append("latency \(Self.describe(latency))")
            }
            if let rate = step.serviceRate {
                settings.serviceRate = rate.perSecond
                settings.serviceQueue = step.serviceQueue
                labels.append("service rate \(rate)" + (step.serviceQueue.map { ", queue \($0)" } ?? ""))
            }
            let body = try! JSONEncoder().encode(settings)
            let result = await admin.exchange(.PUT, "/admin/faults", authorization: authorization, body: body, timeout: .seconds(5))
            _ = context.record(result, metric: "pns.admin", operation: "faults")
        }
        if step.backendSendLatency != nil || step.backendFetchLatency != nil || step.backendSendRate != nil {
            if let control = context.services.system.backendLatency {
                var settings = control.latency
                if let latency = step.backendSendLatency {
                    settings.send = Self.distribution(latency)
                    labels.append("backend send latency \(Self.describe(latency))")
                }
                if let latency = step.backendFetchLatency {
                    settings.fetch = Self.distribution(latency)
                    labels.append("backend fetch latency \(Self.describe(latency))")
                }
                if let rate = step.backendSendRate {
                    settings.sendRate = rate.perSecond
                    settings.sendQueue = step.backendSendQueue
                    labels.append("backend send rate \(rate)" + (step.backendSendQueue.map { ", queue \($0)" } ?? ""))
                }
                control.replace(with: settings)
            } else {
                labels.append("backend latency and send rate skipped: the backend is not embedded")
            }
        }
        if case .restart = step.backend, context.services.system.restartBackend == nil {
            labels.append("backend restart skipped: the backend is not embedded")
        }
        if let ratio = step.disconnect {
            let body = try! JSONEncoder().encode(DisconnectRequest(ratio: ratio))
            let result = await admin.exchange(.POST, "/admin/disconnect", authorization: authorization, body: body, timeout: .seconds(5))
            _ = context.record(result, metric: "pns.admin", operation: "disconnect")
            labels.append("disconnect \(ratio)")
        }
        await admin.shutdown()
        if !labels.isEmpty { context.emit(.marker("faults: " + labels.joined(separator: ", "), at: context.now())) }
    }

    /// Stops the embedded backend for `down` and starts it again; marks when it is back, or why
    /// it is not (the run's traffic ended first, or it could not listen again).
    private func restart(_ down: Duration, _ context: RunContext) async {
        guard let restart = context.services.system.restartBackend else { return }
        context.emit(.marker("backend stops" + (down > .zero ? " for \(DurationText.format(down))" : ""), at: context.now()))
        do {
            try await restart(down)
            context.emit(.marker("faults: backend restarted", at: context.now()))
        } catch is CancellationError {
            context.emit(.marker("faults: backend still down when the traffic ended", at: context.now()))
        } catch {
            context.emit(.error(.backendRestartFailed, at: context.now()))
            context.emit(.marker("faults: backend restart failed: \(error)", at: context.now()))
        }
    }

    static func describe(_ spec: Scenario.LatencySpec) -> String {
        switch spec {
        case .none: "none"
        case .fixed(let d): DurationText.format(d)
        case .uniform(let low, let high): "\(DurationText.format(low))–\(DurationText.format(high))"
        case .normal(let mean, let sd): "\(DurationText.format(mean))±\(DurationText.format(sd))"
        }
    }

    static func distribution(_ spec: Scenario.LatencySpec) -> LatencyDistribution? {
        func ms(_ d: Duration) -> Double { d.seconds * 1000 }
        switch spec {
        case .none: return nil
        case .fixed(let d): return .fixed(ms: ms(d))
        case .uniform(let low, let high): return .uniform(minMs: ms(low), maxMs: ms(high))
        case .normal(let mean, let sd): return .normal(meanMs: ms(mean), stddevMs: ms(sd))
        }
    }
}
