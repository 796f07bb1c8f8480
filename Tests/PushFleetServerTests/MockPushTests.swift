import Foundation
import NIOHTTP1
import PushFleetCore
import PushFleetEmbedded
import PushFleetMockPush
import PushFleetServerSupport
import PushFleetTestSupport
import PushFleetWire
import Testing

@Suite("Mock push service")
struct MockPushTests {
    static func withHTTP2() -> EmbeddedSystem.Configuration {
        var configuration = EmbeddedSystem.Configuration()
        configuration.pushServer.http2Listen = .init(host: "127.0.0.1", port: 0)
        return configuration
    }

    @Test("APNs answers in Apple's terms over HTTP/1.1 and HTTP/2")
    func apnsErrors() async throws {
        try await TestSystem.run(Self.withHTTP2()) { (system: TestSystem) async throws in
            let token = TestDevice.randomToken(for: .apns)
            let ok = try await system.apnsPush(token: token, headers: [("apns-id", "8A5B7F5E-1A5C-4C2A-9E0B-2C6F1D7E3A11")])
            #expect(ok.status == 200)
            #expect(ok.headers.first(name: "apns-id") == "8A5B7F5E-1A5C-4C2A-9E0B-2C6F1D7E3A11")
            // HTTP/2 with prior knowledge, as a provider speaks to APNs; curl is the h2c client here.
            let device = try await TestDevice.connect(pushService: system.pushService, platform: .apns, token: token)
            let h2 = try await Curl.run([
                "--http2-prior-knowledge", "-sS", "-o", "/dev/null", "-w", "%{http_version} %{http_code}",
                "-X", "POST", "-H", "authorization: \(TestCredentials.apnsAuthorization)", "-H", "apns-topic: com.example.app",
                "-d", #"{"aps":{"alert":"over h2"}}"#, "\(system.pushServiceHTTP2!)/3/device/\(token)",
            ])
            #expect(h2 == "2 200")
            #expect(try await device.waitForPushes(2).last?.body.contains("over h2") == true)
            let cases: [(token: String, body: String, headers: [(String, String)], status: Int, reason: String)] = [
                ("nothex", #"{"aps":{}}"#, [], 400, "BadDeviceToken"),
                (token, #"{"aps":{}}"#, [("apns-priority", "7")], 400, "BadPriority"),
                (token, #"{"aps":{}}"#, [("apns-push-type", "shout")], 400, "InvalidPushType"),
                (token, #"{"aps":{}}"#, [("apns-expiration", "soon")], 400, "BadExpirationDate"),
                (token, #"{"aps":{}}"#, [("apns-id", "not-a-uuid")], 400, "BadMessageId"),
                (token, #"{"aps":{}}"#, [("apns-collapse-id", String(repeating: "c", count: 65))], 400, "BadCollapseId"),
                (token, "", [], 400, "PayloadEmpty"),
                (token, "[1,2]", [], 400, "BadPayload"),
                (token, #"{"aps":{"alert":""# + String(repeating: "x", count: 4100) + #""}}"#, [], 413, "PayloadTooLarge"),
                (token, #"{"aps":{}}"#, [("authorization", "basic abc")], 403, "InvalidProviderToken"),
            ]
            for item in cases {
                let response = try await system.apnsPush(token: item.token, body: item.body, headers: item.headers)
                #expect(response.status == item.status, "\(item.reason)")
                #expect(try JSONSerialization.jsonObject(with: response.body) as? [String: String] == ["reason": item.reason])
            }
            let noAuth = try await TestHTTP.request(
                .POST, "\(system.pushService)/3/device/\(token)", body: Data("{}".utf8), headers: [("apns-topic", "t")]
            )
            #expect(noAuth.status == 403 && noAuth.text.contains("MissingProviderToken"))
            let noTopic = try await TestHTTP.request(
                .POST, "\(system.pushService)/3/device/\(token)", body: Data("{}".utf8),
                headers: [("authorization", TestCredentials.apnsAuthorization)]
            )
            #expect(noTopic.status == 400 && noTopic.text.contains("MissingTopic"))
            let stats = try await system.pushStats()
            #expect(stats.rejected["apns:BadDeviceToken"] == 1 && stats.rejected["apns:PayloadTooLarge"] == 1)
            #expect(stats.accepted == 2)
        }
    }

    @Test("FCM and WNS answer with their own error shapes")
    func fcmAndWNSErrors() async throws {
        try await TestSystem.run { (system: TestSystem) async throws in
            let url = "\(system.pushService)/v1/projects/demo/messages:send"
            let auth = [("authorization", try await TestCredentials.fcmAuthorization(pushService: system.pushService))]
            let ok = try await TestHTTP.request(.POST, url, body: Data(#"{"message":{"token":"abc","data":{"k":"v"}}}"#.utf8), headers: auth)
            #expect(ok.status == 200)
            #expect(try ok.json([String: String].self)["name"]?.hasPrefix("projects/demo/messages/") == true)
            let fcmCases: [(String, [(String, String)], Int, String)] = [
                (#"{"message":{"token":"abc"}}"#, [], 401, "CREDENTIALS_MISSING"),
                (#"{"message":{"token":"abc"}}"#, [("authorization", "Bearer t")], 401, "ACCESS_TOKEN_TYPE_UNSUPPORTED"),
                (#"{"message":{"data":{}}}"#, auth, 400, "INVALID_ARGUMENT"),
                (#"{"message":{"token":"a b"}}"#, auth, 400, "INVALID_ARGUMENT"),
                (#"{"message":{"token":"abc","data":{"n":1}}}"#, auth, 400, "INVALID_ARGUMENT"),
                ("not json", auth, 400, "INVALID_ARGUMENT"),
                (#"{"message":{"token":"abc","data":{"k":""# + String(repeating: "x", count: 5000) + #""}}}"#, auth, 400, "INVALID_ARGUMENT"),
            ]
            for (body, headers, status, code) in fcmCases {
                let response = try await TestHTTP.request(.POST, url, body: Data(body.utf8), headers: headers)
                #expect(response.status == status, "\(body.prefix(60))")
                let error = (try JSONSerialization.jsonObject(with: response.body) as? [String: Any])?["error"] as? [String: Any]
                #expect(error?["code"] as? Int == status)
                let detail = (error?["details"] as? [[String: Any]])?.first
                #expect((detail?["errorCode"] ?? detail?["reason"]) as? String == code)
            }

            let wns = "\(system.pushService)/wns/channel-1"
            let wnsAuth = try await TestCredentials.wnsAuthorization(pushService: system.pushService)
            let toast = [("authorization", wnsAuth), ("X-WNS-Type", "wns/toast"), ("content-type", "text/xml")]
            let accepted = try await TestHTTP.request(.POST, wns, body: Data("<toast/>".utf8), headers: toast)
            #expect(accepted.status == 200)
            #expect(accepted.headers.first(name: "X-WNS-Status") == "received")
            #expect(try await TestHTTP.request(.POST, wns, body: Data("<toast/>".utf8), headers: [("X-WNS-Type", "wns/toast")]).status == 401)
            #expect(
                try await TestHTTP.request(.POST, wns, body: Data("x".utf8), headers: [("authorization", wnsAuth), ("X-WNS-Type", "wns/x")])
                    .status == 400
            )
            #expect(try await TestHTTP.request(.POST, wns, body: Data(repeating: 65, count: 5001), headers: toast).status == 413)
        }
    }

    @Test("an offline device gets its one held push on connect, unless it expired or asked not to be held")
    func storeAndForward() async throws {
        try await TestSystem.run { (system: TestSystem) async throws in
            let held = TestDevice.randomToken(for: .apns)
            #expect(try await system.apnsPush(token: held, body: #"{"aps":{"alert":"first"}}"#).status == 200)
            #expect(try await system.apnsPush(token: held, body: #"{"aps":{"alert":"second"}}"#).status == 200)
            let device = try await TestDevice.connect(pushService: system.pushService, platform: .apns, token: held)
            let pushes = try await device.waitForPushes(1)
            #expect(pushes.count == 1)
            #expect(pushes[0].stored && pushes[0].body.contains("second"))
            // The held push comes before the online confirmation.
            #expect(device.rawFrames.firstIndex { $0.contains("\"push\"") }! < device.rawFrames.firstIndex { $0.contains("subscribed") }!)

            let once = TestDevice.randomToken(for: .apns)
            #expect(try await system.apnsPush(token: once, headers: [("apns-expiration", "0")]).status == 200)
            let expired = TestDevice.randomToken(for: .apns)
            let past = String(Int(Date().timeIntervalSince1970) - 10)
            #expect(try await system.apnsPush(token: expired, headers: [("apns-expiration", past)]).status == 200)
            let onceDevice = try await TestDevice.connect(pushService: system.pushService, platform: .apns, token: once)
            let expiredDevice = try await TestDevice.connect(pushService: system.pushService, platform: .apns, token: expired)
            try await Task.sleep(for: .milliseconds(100))
            #expect(onceDevice.pushes.isEmpty && expiredDevice.pushes.isEmpty)

            let stats = try await system.pushStats()
            #expect(stats.stored == 3 && stats.storedReplaced == 1 && stats.storedDelivered == 1)
            #expect(stats.expired == 1 && stats.discardedOffline == 1 && stats.online == 3)
        }
    }

    @Test(
        "a device that asks to acknowledge: what it never acknowledged goes back to the hold when it goes (APNs: the newest); bad acks change nothing; a device that never acknowledges is bounded"
    )
    func acknowledgements() async throws {
        try await TestSystem.run { (system: TestSystem) async throws in
            let token = TestDevice.randomToken(for: .apns)
            let device = try await TestDevice.connect(pushService: system.pushService, platform: .apns, token: token, query: "&ack=1")
            for n in 1...3 { #expect(try await system.apnsPush(token: token, body: #"{"aps":{"alert":"n\#(n)"}}"#).status == 200) }
            let pushes = try await device.waitForPushes(3)
            // Hostile and stray acks: unknown numbers, none, another shape; the connection stays.
            try await device.send(GatewayCommand(op: .ack, pushes: [0, .max, 987_654_321]))
            try await device.send(GatewayCommand(op: .ack))
            try await device.sendRaw(#"{"op":"ack","pushes":"all"}"#)
            try await device.send(GatewayCommand(op: .ack, pushes: [try #require(pushes[0].push)]))
            try await device.waitFor { $0.notices.contains { $0.type == .error } }
            #expect(!device.closed)
            device.close()
            var stats = try await system.pushStats { $0.connections == 0 }
            #expect(stats.requeued == 2 && stats.storedReplaced == 1, "\(stats)")
            let back = try await TestDevice.connect(pushService: system.pushService, platform: .apns, token: token)
            let held = try await back.waitForPushes(1)
            try await Task.sleep(for: .milliseconds(100))
            #expect(back.pushes.count == 1 && held[0].stored && held[0].body.contains("n3"), "\(back.pushes.map(\.body))")

            // A device that asked and never acknowledges holds at most maxUnacknowledged pushes.
            let silent = TestDevice.randomToken(for: .apns)
            let mute = try await TestDevice.connect(pushService: system.pushService, platform: .apns, token: silent, query: "&ack=1")
            for _ in 0..<1030 { _ = try await system.apnsPush(token: silent) }
            _ = try await mute.waitForPushes(1030)
            mute.close()
            // `back` stays connected.
            stats = try await system.pushStats { $0.connections == 1 }
            #expect(stats.requeued == 2 + 1024, "\(stats)")
        }
    }

    @Test("FCM collapses held messages by key: the newest of a key in its place, notification messages under the app's key, a fifth key gives the oldest up")
    func fcmCollapse() async throws {
        try await TestSystem.run { (system: TestSystem) async throws in
            let url = "\(system.pushService)/v1/projects/demo/messages:send"
            let auth = [("authorization", try await TestCredentials.fcmAuthorization(pushService: system.pushService))]
            let token = TestDevice.randomToken(for: .fcm)
            func send(_ n: Int, key: String? = nil, notification: Bool = false) async throws {
                let android = key.map { #","android":{"collapse_key":"\#($0)"}"# } ?? ""
                let content = notification ? #""notification":{"title":"n\#(n)"}"# : #""data":{"n":"n\#(n)"}"#
                let body = #"{"message":{"token":"\#(token)",\#(content)\#(android)}}"#
                #expect(try await TestHTTP.request(.POST, url, body: Data(body.utf8), headers: auth).status == 200)
            }
            try await send(1, key: "a")
            try await send(2, key: "a")
            try await send(3)
            try await send(4, notification: true)
            try await send(5, notification: true)
            try await send(6, key: "b")
            try await send(7, key: "c")
            try await send(8, key: "d")
            let device = try await TestDevice.connect(pushService: system.pushService, platform: .fcm, token: token)
            let pushes = try await device.waitForPushes(5)
            try await Task.sleep(for: .milliseconds(100))
            let held = device.pushes.map { push in ["n3", "n5", "n6", "n7", "n8", "n1", "n2", "n4"].first { push.body.contains("\"\($0)\"") } ?? "?" }
            #expect(held == ["n3", "n5", "n6", "n7", "n8"], "\(device.pushes.map(\.body))")
            #expect(pushes.first { $0.body.contains("\"n5\"") }?.collapseKey == "default")
            let stats = try await system.pushStats()
            #expect(stats.storedReplaced == 3 && stats.stored == 8 && stats.storedDelivered == 5, "n1 by n2, n4 by n5, n2 for the fifth key: \(stats)")
        }
    }

    @Test("WNS caches one notification of each type per channel for an offline device (raw only when asked), the newest of a type in its place")
    func wnsCachePerType() async throws {
        try await TestSystem.run { (system: TestSystem) async throws in
            let channel = TestDevice.randomToken(for: .wns)
            let auth = try await TestCredentials.wnsAuthorization(pushService: system.pushService)
            func send(_ type: String, _ body: String, cache: String? = nil) async throws {
                var headers = [("authorization", auth), ("X-WNS-Type", type), ("content-type", type == "wns/raw" ? "application/octet-stream" : "text/xml")]
                if let cache { headers.append(("X-WNS-Cache-Policy", cache)) }
                #expect(try await TestHTTP.request(.POST, "\(system.pushService)/wns/\(channel)", body: Data(body.utf8), headers: headers).status == 200)
            }
            try await send("wns/toast", "<toast>t1</toast>")
            try await send("wns/tile", "<tile>l1</tile>")
            try await send("wns/toast", "<toast>t2</toast>")
            try await send("wns/badge", "<badge value=\"1\"/>")
            try await send("wns/raw", "r1")
            try await send("wns/raw", "r2", cache: "cache")
            try await send("wns/tile", "<tile>l2</tile>", cache: "no-cache")
            let device = try await TestDevice.connect(pushService: system.pushService, platform: .wns, token: channel)
            _ = try await device.waitForPushes(4)
            try await Task.sleep(for: .milliseconds(100))
            #expect(device.pushes.map(\.body) == ["<toast>t2</toast>", "<tile>l1</tile>", "<badge value=\"1\"/>", "r2"], "\(device.pushes.map(\.body))")
            let stats = try await system.pushStats()
            #expect(stats.storedReplaced == 1 && stats.storedDelivered == 4, "t1 by t2; r1 and l2 not cached: \(stats)")
        }
    }

    @Test("a device's next subscribed says when the gateway took its last connection for gone, or that it took an open one over")
    func previousConnection() async throws {
        try await TestSystem.run { (system: TestSystem) async throws in
            let token = TestDevice.randomToken(for: .fcm)
            func subscribed(_ device: TestDevice) throws -> GatewayNotice { try #require(device.notices.first { $0.type == .subscribed }) }
            let first = try await TestDevice.connect(pushService: system.pushService, platform: .fcm, token: token)
            #expect(try subscribed(first).offlineSince == nil && subscribed(first).tookOver == nil, "a first connection has no past")
            let second = try await TestDevice.connect(pushService: system.pushService, platform: .fcm, token: token)
            #expect(try subscribed(second).tookOver == true && subscribed(second).offlineSince == nil, "the first was still open")
            let before = Int64(Date().timeIntervalSince1970 * 1e9)
            second.close()
            // The gateway has seen the close once the device is offline (a loaded machine takes
            // its time; a fixed sleep guessed it).
            _ = try await system.pushStats(once: { $0.online == 0 })
            let third = try await TestDevice.connect(pushService: system.pushService, platform: .fcm, token: token)
            let after = Int64(Date().timeIntervalSince1970 * 1e9)
            let since = try #require(try subscribed(third).offlineSince)
            #expect(before <= since && since <= after, "closed between \(before) and \(after), said \(since)")
            #expect(try subscribed(third).tookOver == nil)
            third.close()
            first.close()
        }
    }

    @Test("FCM holds every message for an offline device, in order, up to 100; the 101st discards the hold and is held alone")
    func fcmHold() async throws {
        try await TestSystem.run { (system: TestSystem) async throws in
            let url = "\(system.pushService)/v1/projects/demo/messages:send"
            let auth = [("authorization", try await TestCredentials.fcmAuthorization(pushService: system.pushService))]
            func send(_ token: String, _ n: Int) async throws {
                let body = #"{"message":{"token":"\#(token)","data":{"n":"\#(n)"}}}"#
                #expect(try await TestHTTP.request(.POST, url, body: Data(body.utf8), headers: auth).status == 200)
            }
            let few = TestDevice.randomToken(for: .fcm)
            for n in 1...5 { try await send(few, n) }
            let device = try await TestDevice.connect(pushService: system.pushService, platform: .fcm, token: few)
            let pushes = try await device.waitForPushes(5)
            #expect(pushes.map { $0.body.contains("\"n\":\"") ? String($0.body.split(separator: "\"").dropLast().last ?? "") : "" } == ["1", "2", "3", "4", "5"])
            #expect(pushes.allSatisfy { $0.stored })

            let many = TestDevice.randomToken(for: .fcm)
            for n in 1...101 { try await send(many, n) }
            let flooded = try await TestDevice.connect(pushService: system.pushService, platform: .fcm, token: many)
            let kept = try await flooded.waitForPushes(1)
            try await Task.sleep(for: .milliseconds(100))
            #expect(flooded.pushes.count == 1 && kept[0].body.contains("\"n\":\"101\""), "\(flooded.pushes.map(\.body))")
            let stats = try await system.pushStats()
            #expect(stats.discardedHeld == 100 && stats.stored == 106 && stats.storedDelivered == 6, "\(stats)")
        }
    }

    @Test("the multiplexed gateway carries many devices, each online on its own")
    func multiplexed() async throws {
        try await TestSystem.run { (system: TestSystem) async throws in
            let gateway = try await TestDevice.multiplexed(pushService: system.pushService)
            let devices = (0..<50).map { index in
                DeviceAddress(platform: index % 2 == 0 ? .apns : .fcm, token: TestDevice.randomToken(for: index % 2 == 0 ? .apns : .fcm))
            }
            // A push held for one device before it subscribes arrives on subscription.
            #expect(try await system.apnsPush(token: devices[0].token).status == 200)
            try await gateway.send(GatewayCommand(op: .subscribe, devices: devices))
            try await gateway.waitFor { $0.notices.contains { $0.type == .subscribed } }
            #expect(gateway.pushes.map(\.token) == [devices[0].token])
            #expect(try await system.pushStats().online == 50)

            for device in devices.prefix(10) {
                _ = try await system.register("mux-\(device.token.prefix(8))", platform: device.platform, handle: device.token)
                _ = try await system.sendSecure(from: "alice", to: "mux-\(device.token.prefix(8))", payload: "x")
            }
            let pushes = try await gateway.waitForPushes(11)
            #expect(Set(pushes.dropFirst().map(\.token)) == Set(devices.prefix(10).map(\.token)))

            // Unsubscribed devices are offline: their pushes are held, not sent here.
            try await gateway.send(GatewayCommand(op: .unsubscribe, devices: [devices[1]]))
            try await gateway.waitFor { $0.notices.contains { $0.type == .unsubscribed } }
            _ = try await system.sendSecure(from: "alice", to: "mux-\(devices[1].token.prefix(8))", payload: "y")
            try await Task.sleep(for: .milliseconds(100))
            #expect(gateway.pushes.count == 11)
            #expect(try await system.pushStats().online == 49)

            // Unregister through the gateway: the provider now hears Unregistered.
            try await gateway.send(GatewayCommand(op: .unregister, devices: [devices[2]]))
            try await gateway.waitFor { $0.notices.contains { $0.type == .unregistered } }
            let gone = try await system.apnsPush(token: devices[2].token)
            #expect(gone.status == 410 && gone.text.contains("Unregistered") && gone.text.contains("timestamp"))

            // Bad frames get an error notice; the connection stays usable.
            try await gateway.sendRaw("not json")
            try await gateway.send(GatewayCommand(op: .subscribe, devices: [DeviceAddress(platform: .apns, token: "zz")]))
            try await gateway.waitFor { $0.notices.filter { $0.type == .error }.count == 2 }
            #expect(try await system.apnsPush(token: devices[4].token).status == 200)
            _ = try await gateway.waitForPushes(12)
        }
    }

    @Test("drop and latency faults act on delivery; throttle and unregistered on the answer")
    func deliveryFaults() async throws {
        try await TestSystem.run { (system: TestSystem) async throws in
            let device = try await TestDevice.connect(pushService: system.pushService, platform: .apns)
            let token = device.address!.token

            try await system.setFaults(FaultSettings(drop: 1))
            #expect(try await system.apnsPush(token: token).status == 200)
            try await Task.sleep(for: .milliseconds(150))
            #expect(device.pushes.isEmpty)
            #expect(try await system.pushStats().dropped == 1)

            try await system.setFaults(FaultSettings(latency: .fixed(ms: 300)))
            let sent = ContinuousClock.now
            #expect(try await system.apnsPush(token: token).status == 200)
            _ = try await device.waitForPushes(1)
            #expect(ContinuousClock.now - sent >= .milliseconds(300))

            try await system.setFaults(FaultSettings(throttle: 1))
            let throttled = try await system.apnsPush(token: token)
            #expect(throttled.status == 429 && throttled.text.contains("TooManyRequests"))
            let fcm = try await TestHTTP.request(
                .POST, "\(system.pushService)/v1/projects/demo/messages:send", body: Data(#"{"message":{"token":"abc"}}"#.utf8),
                headers: [("authorization", try await TestCredentials.fcmAuthorization(pushService: system.pushService))]
            )
            #expect(fcm.status == 429 && fcm.text.contains("QUOTA_EXCEEDED"))
            let wns = try await TestHTTP.request(
                .POST, "\(system.pushService)/wns/abc", body: Data("x".utf8),
                headers: [("authorization", try await TestCredentials.wnsAuthorization(pushService: system.pushService)), ("X-WNS-Type", "wns/raw")]
            )
            #expect(wns.status == 406)

            try await system.setFaults(FaultSettings(unregisteredRatio: 1))
            #expect(try await system.apnsPush(token: token).status == 410)
            try await system.setFaults(FaultSettings())
            #expect(try await system.apnsPush(token: token).status == 200)

            let invalid = try await TestHTTP.request(.PUT, "\(system.pushService)/admin/faults", auth: system.admin, body: Data(#"{"drop":2}"#.utf8))
            #expect(invalid.status == 400 && invalid.text.contains("drop"))
        }
    }

    @Test("forced disconnect closes single-device connections and tells multiplexed ones")
    func forcedDisconnect() async throws {
        try await TestSystem.run { (system: TestSystem) async throws in
            let singles = try await withThrowingTaskGroup(of: TestDevice.self) { group in
                for _ in 0..<5 { group.addTask { try await TestDevice.connect(pushService: system.pushService, platform: .fcm) } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            let gateway = try await TestDevice.multiplexed(pushService: system.pushService)
            let muxed = (0..<5).map { _ in DeviceAddress(platform: .apns, token: TestDevice.randomToken(for: .apns)) }
            try await gateway.send(GatewayCommand(op: .subscribe, devices: muxed))
            try await gateway.waitFor { $0.notices.contains { $0.type == .subscribed } }

            let result = try await TestHTTP.request(.POST, "\(system.pushService)/admin/disconnect", auth: system.admin, json: DisconnectRequest(ratio: 1))
            #expect(try result.json(DisconnectResult.self).disconnected == 10)
            for device in singles { try await device.waitFor { $0.closed } }
            try await gateway.waitFor { $0.notices.contains { $0.type == .disconnected } }
            #expect(Set(gateway.notices.first { $0.type == .disconnected }!.devices) == Set(muxed))
            #expect(try await system.pushStats().online == 0)

            // Offline now: a push is held and arrives when the device comes back.
            #expect(try await system.apnsPush(token: muxed[0].token).status == 200)
            try await gateway.send(GatewayCommand(op: .subscribe, devices: [muxed[0]]))
            #expect(try await gateway.waitForPushes(1)[0].stored)

            // A partial ratio takes roughly that share, from a seeded draw.
            let many = (0..<200).map { _ in DeviceAddress(platform: .apns, token: TestDevice.randomToken(for: .apns)) }
            try await gateway.send(GatewayCommand(op: .subscribe, devices: many))
            try await gateway.waitFor { $0.notices.filter { $0.type == .subscribed }.count == 3 }
            let half = try await TestHTTP.request(.POST, "\(system.pushService)/admin/disconnect", auth: system.admin, json: DisconnectRequest(ratio: 0.5))
            #expect((60...140).contains(try half.json(DisconnectResult.self).disconnected))
        }
    }

    @Test("a second connection for the same token takes the device over")
    func takeover() async throws {
        try await TestSystem.run { (system: TestSystem) async throws in
            let first = try await TestDevice.connect(pushService: system.pushService, platform: .apns)
            let second = try await TestDevice.connect(pushService: system.pushService, platform: .apns, token: first.address!.token)
            try await first.waitFor { $0.closed }
            #expect(try await system.apnsPush(token: first.address!.token).status == 200)
            _ = try await second.waitForPushes(1)
        }
    }
}
