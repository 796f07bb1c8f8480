import Foundation
import PushFleetLauncher
import Subprocess
import Synchronization
import SystemPackage

extension Shards {
    /// One child `pushfleet` process: its arguments, its shard index (JOB_COMPLETION_INDEX) if it
    /// is a shard, and the file its output and errors go to.
    struct Child: Sendable {
        var arguments: [String]
        var shardIndex: Int?
        var log: String
    }

    /// The shards still running, for a SIGINT or SIGTERM to the command to reach them as SIGTERM
    /// (a shard then writes what it recorded; a second signal makes it stop at once).
    final class RunningShards: Sendable {
        private let state = Mutex<(pids: [Int: pid_t], stopping: Bool)>(([:], false))

        func terminate() {
            state.withLock { state in
                state.stopping = true
                for pid in state.pids.values { kill(pid, SIGTERM) }
            }
        }

        fileprivate func started(_ index: Int, _ pid: pid_t) {
            state.withLock { state in
                state.pids[index] = pid
                // A shard that started after the signal is stopped as the others were.
                if state.stopping { kill(pid, SIGTERM) }
            }
        }

        fileprivate func ended(_ index: Int) {
            _ = state.withLock { $0.pids.removeValue(forKey: index) }
        }
    }

    /// Plays the shards all at once and awaits each; their termination statuses, in order.
    static func play(_ executable: String, _ shards: [Child], running: RunningShards) async throws -> [TerminationStatus] {
        try await withThrowingTaskGroup(of: (Int, TerminationStatus).self) { group in
            for (index, shard) in shards.enumerated() {
                group.addTask {
                    let outcome = try await spawn(executable, shard) { execution in running.started(index, execution.processIdentifier.value) }
                    running.ended(index)
                    return (index, outcome.terminationStatus)
                }
            }
            var statuses = [TerminationStatus?](repeating: nil, count: shards.count)
            for try await (index, status) in group { statuses[index] = status }
            return statuses.compactMap { $0 }
        }
    }

    /// Plays one child to its end; its termination status and the highest peak resident memory
    /// (VmHWM) read while it ran.
    static func playMeasured(_ executable: String, _ child: Child) async throws -> (status: TerminationStatus, peak: UInt64) {
        let outcome = try await spawn(executable, child) { execution in
            let pid = String(execution.processIdentifier.value)
            var peak: UInt64 = 0
            // Sampled while the child has memory: once it has exited it has none, and it is not
            // reaped before this returns, so its pid is never another process's.
            while let bytes = ProcessMemory.peakResident(pid) {
                peak = max(peak, bytes)
                do { try await Task.sleep(for: .milliseconds(100)) } catch { break }
            }
            return peak
        }
        return (outcome.terminationStatus, outcome.closureResult)
    }

    /// How a child's end is named: its exit code, or the signal that ended it.
    static func describe(_ status: TerminationStatus) -> String {
        switch status {
        case .exited(let code): "exited \(code)"
        case .signaled(let signal): "ended on signal \(signal)"
        }
    }

    private static func spawn<Result: Sendable>(
        _ executable: String, _ child: Child, _ body: (Execution<NoInput, FileDescriptorOutput, CombinedErrorOutput>) async throws -> Result
    ) async throws -> ExecutionResult<Result, FileDescriptorOutput, CombinedErrorOutput> {
        var options = PlatformOptions()
        // A process group of its own, so that a Ctrl-C reaches the command only, which passes it on.
        options.processGroupID = 0
        // Should the command be cancelled or another child fail to start: SIGTERM as on a stop,
        // then SIGKILL 30 s on.
        options.teardownSequence = [.send(signal: .terminate, allowedDurationToNextStep: .seconds(30))]
        var environment = Environment.inherit
        if let index = child.shardIndex { environment = environment.updating(["JOB_COMPLETION_INDEX": String(index)]) }
        let log = try FileDescriptor.open(
            FilePath(child.log), .writeOnly, options: [.create, .truncate], permissions: [.ownerReadWrite, .groupRead, .otherRead]
        )
        return try await Subprocess.run(
            .path(FilePath(executable)), arguments: Arguments(child.arguments), environment: environment, platformOptions: options,
            input: .none, output: .fileDescriptor(log, closeAfterSpawningProcess: true), error: .combinedWithOutput, body: body
        )
    }
}
