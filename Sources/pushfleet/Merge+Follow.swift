import Foundation
import PushFleetMetrics

extension Merge {
    /// Follows a run's folder while its shards play, a frame of the whole run about once a
    /// second to `broadcast` (when the page is served), until every shard has ended, `limit`
    /// has passed, or the task is cancelled (its children ended): then one last look at the
    /// tapes as they were left.
    static func follow(_ root: String, broadcast: LiveBroadcast?, window: Duration, within limit: Duration) async {
        let follower = ShardFollower(root: root, window: window)
        let deadline = ContinuousClock.now + limit
        var opened = false
        func publish(_ frame: LiveFrame?) {
            guard let broadcast else { return }
            if !opened, let (scenario, plan) = follower.hello() {
                broadcast.open(LiveServer.hello(scenario, plan: plan, window: window, shards: follower.count))
                opened = true
            }
            if opened, let frame {
                let (event, json) = LiveServer.frame(frame)
                broadcast.publish(event, json: json)
            }
        }
        while ContinuousClock.now < deadline, !Task.isCancelled {
            let (frame, ended) = follower.look()
            publish(frame)
            if ended { return }
            try? await Task.sleep(for: .seconds(1))
        }
        publish(follower.look(force: true).frame)
    }
}
