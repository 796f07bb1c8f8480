package import NIOCore
import NIOPosix
import Synchronization

/// Runs Swift tasks on one NIO event loop, so that a load loop and the connections it drives
/// share a thread: an answer read in the loop resumes its task without waking another thread.
package final class EventLoopExecutor: TaskExecutor {
    package let loop: any EventLoop

    package init(_ loop: any EventLoop) { self.loop = loop }

    package func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        loop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }

    /// The event loop this thread runs, if it is one's.
    package static var current: (any EventLoop)? { MultiThreadedEventLoopGroup.currentEventLoop }

    /// Waits on `loop`'s own timer rather than the global one: a task that runs on the loop is
    /// woken by the loop that was waiting anyway, with no thread woken to arm or fire the timer.
    /// Throws `CancellationError` when the task is cancelled first.
    package static func sleep(for nanoseconds: Int64, on loop: any EventLoop) async throws {
        let scheduled = Mutex<Scheduled<Void>?>(nil)
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let task = loop.scheduleTask(in: .nanoseconds(max(0, nanoseconds))) {}
                task.futureResult.whenComplete { result in
                    switch result {
                    case .success: continuation.resume()
                    case .failure: continuation.resume(throwing: CancellationError())
                    }
                }
                scheduled.withLock { $0 = task }
                if Task.isCancelled { task.cancel() }
            }
        } onCancel: {
            scheduled.withLock { $0 }?.cancel()
        }
    }
}
