#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import NIOCore
import NIOPosix

// Swift's global executor on NIO's event loops: tasks and the network I/O they await then run on
// the same threads, instead of hopping between NIO's threads and the cooperative pool.
_ = NIOSingletons.unsafeTryInstallSingletonPosixEventLoopGroupAsConcurrencyGlobalExecutor()

exit(await CommandRunner.run())
