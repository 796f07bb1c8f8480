import Foundation
import PushFleetTestSupport
import Testing

/// `pushfleet serve` with its SQLite store on a real filesystem that fills up: a 1 MiB tmpfs
/// mounted in a mount namespace of the test's own (no root needed where user namespaces are
/// allowed, nothing visible outside it), so the write fails with ENOSPC as on a full disk.
@Suite("serve: a store on a full disk")
struct StoreDiskFullCLITests {
    /// Whether a tmpfs can be mounted in a private mount namespace here.
    static let canMountTmpfs: Bool = {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["unshare", "--mount", "--map-root-user", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return false }
        process.waitUntilExit()
        return process.terminationStatus == 0
    }()

    @Test(
        "the disk fills under serve: 507 store_full with the reason, logged once, counted; with space again it works",
        .enabled(if: canMountTmpfs, "no private tmpfs mount here (user namespaces not allowed)")
    )
    func diskFull() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pf-disk-full-\(UUID().uuidString)")
        let mount = directory.appendingPathComponent("disk")
        try FileManager.default.createDirectory(at: mount, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let log = directory.appendingPathComponent("serve.log").path
        let script = """
            set -u
            mount -t tmpfs -o size=1m tmpfs "$DISK" || exit 90
            "$BIN" serve --backend-listen 127.0.0.1:0 --pns-listen 127.0.0.1:0 --store "sqlite:$DISK/store.sqlite" > "$LOG" 2>&1 &
            serve=$!
            url=""
            for i in $(seq 1 600); do
              url=$(sed -n 's/^backend: *\\(http[^ ]*\\).*/\\1/p' "$LOG")
              [ -n "$url" ] && break
              sleep 0.1
            done
            [ -n "$url" ] || { kill $serve; exit 91; }
            register() { curl -s -o "$DIR/body" -w "%{http_code}" -u "$1:$1" -X POST "$url/api/register"; }
            echo "before: $(register u0)"
            avail=$(df --output=avail -B1 "$DISK" | tail -1)
            head -c $((avail > 8192 ? avail - 8192 : 0)) /dev/zero > "$DISK/filler" 2>/dev/null
            for i in $(seq 1 3000); do
              code=$(register "u$i")
              if [ "$code" != 200 ]; then echo "refused: $code $(cat "$DIR/body")"; break; fi
            done
            echo "again: $(register late)"
            echo "stats: $(curl -s "$url/stats")"
            rm "$DISK/filler"
            echo "freed: $(register freed)"
            kill $serve
            wait $serve
            echo "log:"
            grep PushFleetBackend "$LOG"
            """
        let outcome = try await ChildProcess.run(
            "env", ["DISK=\(mount.path)", "DIR=\(directory.path)", "LOG=\(log)", "BIN=\(CLITests.binary)", "unshare", "--mount", "--map-root-user", "sh", "-c", script],
            limit: .seconds(120)
        )
        let text = outcome.text
        #expect(text.contains("before: 200"), "\(text)")
        #expect(text.contains(#"refused: 507 {"error":{"#) && text.contains(#""reason":"store_full""#), "\(text)")
        #expect(text.contains("again: 507"), "\(text)")
        #expect(text.contains(#""storeProblem":"store_full""#), "\(text)")
        #expect(text.contains("freed: 200"), "\(text)")
        let logLines = text.components(separatedBy: "log:").last?.split(separator: "\n") ?? []
        #expect(logLines.filter { $0.contains("store failing (store_full)") }.count == 1, "\(text)")
        #expect(logLines.filter { $0.contains("store works again after store_full") }.count == 1, "\(text)")
    }
}
