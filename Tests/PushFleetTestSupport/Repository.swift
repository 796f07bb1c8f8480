package import Foundation

/// The repository's folders, for fixtures read from disk (scenarios/, Fuzz/corpus/).
package enum Repository {
    /// The repository's root folder: this file is Tests/PushFleetTestSupport/Repository.swift.
    package static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
}
