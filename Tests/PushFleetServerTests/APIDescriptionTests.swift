import Foundation
import PushFleetCore
import PushFleetScenario
import Testing

@Suite("API descriptions")
struct APIDescriptionTests {
    @Test("the presets load without a problem, with Basic and with token auth")
    func presetsLoad() throws {
        for auth in Scenario.AuthMode.allCases {
            do {
                let api = try ScenarioLoader.loadPreset("appbackend", auth: auth)
                #expect(api.register.requests.map(\.metric) == ["http.register.post", "http.register.put"])
                #expect((api.login != nil) == (auth == .token))
            } catch {
                Issue.record("\(error)")
            }
        }
    }
}
