import Foundation

/// Debian's Chromium for the tests that drive a page in a real browser: installed with apt-get
/// when missing, as the PostgreSQL tests install their server.
package enum TestChromium {
    package struct Missing: Error, CustomStringConvertible {
        package var description: String
    }

    package static func path() throws -> String {
        let candidates = ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        if let found = candidates.first(where: FileManager.default.isExecutableFile(atPath:)) { return found }
        let install = try TestPostgres.shell("bash", ["-c", "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium"])
        guard let found = candidates.first(where: FileManager.default.isExecutableFile(atPath:)) else {
            throw Missing(description: "Chromium is not installed and apt-get could not install it: \(install.output.suffix(500))")
        }
        return found
    }
}
