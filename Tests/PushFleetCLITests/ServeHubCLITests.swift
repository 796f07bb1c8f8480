import Foundation
import PushFleetTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `pushfleet serve`'s notification hub as a client configured from its printed lines meets it.
@Suite("serve: the notification hub's lines")
struct ServeHubCLITests {
    /// Starts serve with `arguments` and returns its output once `until` is printed.
    static func serve(_ arguments: [String], in directory: URL, until marker: String) async throws -> (Process, String) {
        let (process, pipe) = try CLITests.launch(
            ["serve", "--backend-listen", "127.0.0.1:0", "--pns-listen", "127.0.0.1:0", "--log-level", "warning"] + arguments, in: directory
        )
        let collected = OutputCollector(pipe)
        let deadline = ContinuousClock.now + .seconds(60)
        while !collected.text.contains(marker) {
            guard process.isRunning, ContinuousClock.now < deadline else {
                process.terminate()
                throw CLIFailure(description: "serve did not print '\(marker)': \(collected.text)")
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        // The lines after the marker are printed in the same write.
        try await Task.sleep(for: .milliseconds(100))
        return (process, collected.text)
    }

    struct CLIFailure: Error, CustomStringConvertible {
        var description: String
    }

    final class OutputCollector: @unchecked Sendable {
        private let lock = NSLock()
        private var data = Data()

        init(_ pipe: Pipe) {
            pipe.fileHandleForReading.readabilityHandler = { [weak self] handle in
                let chunk = handle.availableData
                // At the end of the output the handler would be called again and again.
                guard !chunk.isEmpty else {
                    handle.readabilityHandler = nil
                    return
                }
                guard let self else { return }
                self.lock.withLock { self.data.append(chunk) }
            }
        }

        var text: String { lock.withLock { String(decoding: data, as: UTF8.self) } }
    }

    static func line(_ prefix: String, in output: String) -> String? {
        output.split(separator: "\n").first { $0.hasPrefix(prefix) }.map { String($0.dropFirst(prefix.count)) }
    }

    @Test func theHubsHostIsCoveredByTheDefaultCertificateAndItsHostsLineIsPrinted() async throws {
        let directory = try CLITests.temporaryDirectory()
        let ca = directory.appendingPathComponent("ca.pem").path
        let (process, output) = try await Self.serve(
            ["--pns-tls-listen", "127.0.0.1:0", "--tls-ca-out", ca], in: directory, until: "hub listen-only connection string:"
        )
        defer { process.terminate(); process.waitUntilExit() }
        let hosts = output.split(separator: "\n").first { $0.contains("Hub") && $0.contains("hosts:") }
        #expect(hosts?.contains("127.0.0.1 pushfleet.servicebus.windows.net") == true, "\(output)")
        let tls = try #require(Self.line("push TLS:", in: output)?.trimmingCharacters(in: .whitespaces).split(separator: " ").first)
        let port = try #require(tls.split(separator: ":").last)
        // The docs' "by host name" setup: the namespace's name resolves to the mock, its CA trusted.
        let answer = try await Curl.run([
            "-sS", "-o", "-", "-w", "\n%{http_code}", "--resolve", "pushfleet.servicebus.windows.net:\(port):127.0.0.1", "--cacert", ca,
            "-X", "POST", "https://pushfleet.servicebus.windows.net:\(port)/pushfleet/registrationids?api-version=2015-01",
        ])
        #expect(answer.hasSuffix("\n401") && answer.contains("<Error><Code>401</Code>"), "\(answer)")
    }

    @Test func connectionStringsArePrintedAsThePortalWritesThemAndBothFormsAreTaken() async throws {
        let directory = try CLITests.temporaryDirectory()
        let (process, output) = try await Self.serve([], in: directory, until: "hub listen-only connection string:")
        process.terminate()
        process.waitUntilExit()
        for label in ["hub connection string: ", "hub connection string (plain HTTP): ", "hub listen-only connection string: "] {
            let text = try #require(Self.line(label, in: output), "\(output)")
            // As Microsoft's REST reference parses one: exactly Endpoint, SharedAccessKeyName, SharedAccessKey.
            let parts = text.split(separator: ";")
            #expect(parts.count == 3, "\(label)\(text)")
            #expect(parts.map { $0.split(separator: "=", maxSplits: 1)[0] } == ["Endpoint", "SharedAccessKeyName", "SharedAccessKey"])
        }
        #expect(Self.line("hub name: ", in: output) == "pushfleet", "\(output)")
        // A backend sends through a hub named apart from its connection string, or in it.
        let portal = "Endpoint=sb://other.servicebus.windows.net/;SharedAccessKeyName=DefaultFullSharedAccessSignature;SharedAccessKey=abcdefghijklmnopqrstuvwxyz0123456789="
        for (arguments, hub) in [(["--hub", portal, "--hub-name", "elsewhere"], "elsewhere"), (["--hub", portal + ";EntityPath=named"], "named")] {
            let (serve, said) = try await Self.serve(arguments, in: directory, until: "backend sends through hub")
            serve.terminate()
            serve.waitUntilExit()
            #expect(said.contains("backend sends through hub \(hub) at https://other.servicebus.windows.net"), "\(said)")
        }
        let nameless = try await CLITests.run(["serve", "--hub", portal], in: directory)
        #expect(nameless.status == 2 && nameless.output.contains("--hub-name"), "\(nameless.output)")
    }
}
