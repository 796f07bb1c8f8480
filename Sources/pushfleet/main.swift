#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import PushFleetMetrics

CHeap.configureForLongRuns(cores: ProcessInfo.processInfo.activeProcessorCount)

// Swift's global executor stays the default cooperative pool: putting it on NIO's event loops
// made requests ~25% cheaper in `bench http`, but with the embedded servers in the same process
// the event loops starved under a 30,000-device ramp (see docs/performance.md).
exit(await CommandRunner.run())
