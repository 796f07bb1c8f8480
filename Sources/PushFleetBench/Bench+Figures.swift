import Foundation
import ArgumentParser
import PushFleetCore
import PushFleetLauncher

extension Bench {
    /// Prints a titled two-column table of figures.
    static func printFigures(_ title: String, _ rows: [(String, String)]) {
        let width = rows.map(\.0.count).max() ?? 0
        FileHandleOutput.standardOutput(
            "\n\(title)\n" + rows.map { $0.0.padding(toLength: width, withPad: " ", startingAt: 0) + "  " + $0.1 }.joined(separator: "\n")
        )
    }
}

extension Bench {
    /// A duration flag's value; malformed text is a usage error (exit 2) naming the flag.
    static func duration(_ text: String, flag: String) throws -> Duration {
        do { return try DurationText.parse(text) } catch { throw ValidationError("\(flag): \(error)") }
    }
}
