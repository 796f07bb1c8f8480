import Foundation
import SQLiteNIO

/// The SQLite store's file as the server opened it: deleted, moved away or replaced under a
/// running server, the server's open handle would keep taking writes that no later process
/// sees, so the path must still name the same file (device and inode) as at opening.
struct SQLiteFile: Sendable {
    struct Identity: Equatable {
        var device: UInt64
        var inode: UInt64
    }

    let path: String
    /// Nil when the file could not be examined at opening: then it is not checked.
    let opened: Identity?

    init(path: String) {
        self.path = path
        opened = Self.identity(of: path)
    }

    static func identity(of path: String) -> Identity? {
        // Through FileManager: Glibc's `struct stat` is owned by CoreFoundation in release
        // builds, whose members a file may not name without importing it.
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: path),
              let device = (attributes[.systemNumber] as? NSNumber)?.uint64Value,
              let inode = (attributes[.systemFileNumber] as? NSNumber)?.uint64Value
        else { return nil }
        return Identity(device: device, inode: inode)
    }

    func checkInPlace() throws {
        guard let opened, Self.identity(of: path) != opened else { return }
        throw StoreError.unavailable(
            "sqlite:\(path) was deleted, moved or replaced while the server had it open; writes would be lost: "
                + "put the file back or restart the server"
        )
    }

    /// A driver error as the store's failure: no space is `full`, a file that cannot be read or
    /// written is `unavailable`; anything else (a statement the store got wrong) as it is.
    func storeError(_ error: any Error) -> any Error {
        guard let error = error as? SQLiteError else { return error }
        let name = String(describing: error.reason)
        if case .full = error.reason {
            return StoreError.full("sqlite:\(path): \(error.message)")
        }
        let unreachable = ["ioError", "cantOpen", "readOnly", "readonly", "corrupt", "notADatabase", "busy", "locked"]
        if unreachable.contains(where: { name.hasPrefix($0) }) {
            return StoreError.unavailable("sqlite:\(path): \(error.description)")
        }
        return error
    }
}
