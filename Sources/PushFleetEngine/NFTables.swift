import Foundation
import PushFleetCore
import Subprocess
import SystemPackage

/// The kernel's packet filter, driven through `nft -f -`: the run's own table, its scripts, and
/// the tables of runs that died without removing theirs.
///
/// nft rather than netlink from Swift: the scripts are a few per run, nft checks them as the
/// kernel's own tool, and every script is one transaction (docs/network-faults.md).
package enum NFTables {
    package struct Failure: Error, CustomStringConvertible {
        package var description: String
    }

    /// Where nft is, when it is installed.
    static var executable: String? {
        ["/usr/sbin/nft", "/sbin/nft", "/usr/bin/nft", "/bin/nft"].first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// Why this process cannot apply network faults, or nil when it can: it needs nft, and root
    /// or CAP_NET_ADMIN.
    package static func unavailable() -> String? {
        var missing: [String] = []
        if executable == nil { missing.append("nftables' nft is not installed (apt-get install nftables; scripts/install-bench-tools installs it)") }
        if geteuid() != 0 && !hasNetAdmin() {
            missing.append("this process is neither root nor holds CAP_NET_ADMIN (run as root, or setcap cap_net_admin+ep on the binary)")
        }
        return missing.isEmpty ? nil : "network faults need the kernel's packet filter: " + missing.joined(separator: "; ")
    }

    /// CAP_NET_ADMIN (bit 12) in the effective set, as /proc/self/status gives it.
    static func hasNetAdmin() -> Bool {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("CapEff:") }),
            let mask = UInt64(line.dropFirst("CapEff:".count).trimmingCharacters(in: .whitespaces), radix: 16)
        else { return false }
        return mask & (1 << 12) != 0
    }

    /// Runs a script in one transaction; nft's own message when it refuses.
    package static func run(_ script: String) async throws {
        guard let nft = executable else { throw Failure(description: "nft is not installed") }
        let result = try await Subprocess.run(
            .path(FilePath(nft)), arguments: ["-f", "-"], input: .string(script), output: .discarded, error: .string(limit: 64 * 1024)
        )
        guard result.terminationStatus.isSuccess else {
            let message = result.standardError.trimmingCharacters(in: .whitespacesAndNewlines)
            throw Failure(description: "nft refused the run's rules: " + (message.isEmpty ? "\(result.terminationStatus)" : String(message.prefix(2000))))
        }
    }

    /// Names of the `inet` tables now in the kernel.
    static func tables() async -> [String] {
        guard let nft = executable,
            let result = try? await Subprocess.run(.path(FilePath(nft)), arguments: ["list", "tables", "inet"], output: .string(limit: 1 << 20), error: .discarded),
            result.terminationStatus.isSuccess
        else { return [] }
        let text = result.standardOutput
        // Lines read "table inet NAME".
        return text.split(separator: "\n").compactMap { line in
            let words = line.split(separator: " ")
            return words.count == 3 && words[0] == "table" && words[1] == "inet" ? String(words[2]) : nil
        }
    }

    /// Removes the tables of pushfleet processes that are gone (a run killed with SIGKILL leaves
    /// its table behind); returns their names.
    @discardableResult
    package static func sweepStale() async -> [String] {
        let stale = await tables().filter { name in
            guard let pid = NetworkFaultPlan.pid(ofTable: name) else { return false }
            return pid != getpid() && kill(pid, 0) != 0 && errno == ESRCH
        }
        for name in stale { try? await run("delete table inet \(name)\n") }
        return stale
    }
}
