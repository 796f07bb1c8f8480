import Glibc
import NIOCore

/// A test with a short idle timeout on the server may see the shared client's pooled connection
/// closed as a request goes out on it (a reset, before any answer, the request never read): the
/// call is made again, once. Anything else, and a second reset, is the test's failure.
package func againOnReset<T>(_ call: () async throws -> T) async throws -> T {
    do {
        return try await call()
    } catch let error as IOError where error.errnoCode == ECONNRESET {
        return try await call()
    }
}
