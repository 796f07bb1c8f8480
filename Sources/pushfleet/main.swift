#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import Logging
import NIOCore
import NIOPosix
import PushFleetMetrics
import PushFleetServerSupport

CHeap.configureForLongRuns(cores: ProcessInfo.processInfo.activeProcessorCount)
LoggingSystem.bootstrap { StderrLogHandler(label: $0) }

// Swift's global executor is the default cooperative pool, except in `serve`: there every task
// runs on NIO's event loops, which saves the hand-offs between the pool's threads and the loops
// (~10% of the servers' CPU per secure push, `bench delivery`). Where the fleet runs, the
// embedded servers' loops starved under a 30,000-device ramp with it (docs/performance.md). It
// has to be decided before the first task starts, hence the look at the arguments; so does the
// number of loops (ServerEventLoops).
if CommandLine.arguments.dropFirst().first == "serve" {
    NIOSingletons.groupLoopCountSuggestion = ServerEventLoops.count(
        arguments: CommandLine.arguments.dropFirst(2), cores: ProcessInfo.processInfo.activeProcessorCount
    )
    _ = NIOSingletons.unsafeTryInstallSingletonPosixEventLoopGroupAsConcurrencyGlobalExecutor()
}
exit(await CommandRunner.run())
