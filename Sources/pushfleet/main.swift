#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import Logging
import PushFleetMetrics
import PushFleetServerSupport

CHeap.configureForLongRuns(cores: ProcessInfo.processInfo.activeProcessorCount)
LoggingSystem.bootstrap { StderrLogHandler(label: $0) }

// Swift's global executor stays the default cooperative pool: putting it on NIO's event loops
// made requests ~25% cheaper in `bench http`, but with the embedded servers in the same process
// the event loops starved under a 30,000-device ramp (see docs/performance.md).
exit(await CommandRunner.run())
