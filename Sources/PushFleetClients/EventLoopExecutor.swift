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
        try await TimerWait().wait(for: nanoseconds, on: loop)
    }
}

/// One wait on a loop's timer, as a scheduled callback (no promise, future or closure per
/// wait): resumed exactly once, by the timer or by a cancellation, whichever comes first.
final class TimerWait: NIOScheduledCallbackHandler, Sendable {
    private enum State {
        case idle
        case waiting(UnsafeContinuation<Void, any Error>, NIOScheduledCallback?)
        case cancelled
        case done
    }

    private let state = Mutex(State.idle)

    /// Waits `nanoseconds` on `loop`'s timer; throws `CancellationError` when the task is
    /// cancelled or ``cancel()`` is called first.
    func wait(for nanoseconds: Int64, on loop: any EventLoop) async throws {
        try await withTaskCancellationHandler {
            try await withUnsafeThrowingContinuation { (continuation: UnsafeContinuation<Void, any Error>) in
                begin(continuation, in: .nanoseconds(max(0, nanoseconds)), on: loop)
            }
        } onCancel: {
            cancel()
        }
    }

    private func begin(_ continuation: UnsafeContinuation<Void, any Error>, in delay: TimeAmount, on loop: any EventLoop) {
        let cancelledAlready = state.withLock { state in
            guard case .idle = state else { return true }
            state = .waiting(continuation, nil)
            return false
        }
        if cancelledAlready {
            continuation.resume(throwing: CancellationError())
            return
        }
        let callback: NIOScheduledCallback
        do {
            callback = try loop.scheduleCallback(in: delay, handler: self)
        } catch {
            // The loop is shutting down.
            finish(throwing: error)
            return
        }
        let cancelledMeanwhile = state.withLock { state in
            switch state {
            case .waiting(let continuation, nil):
                state = .waiting(continuation, callback)
                return false
            case .cancelled: return true
            default: return false
            }
        }
        if cancelledMeanwhile { callback.cancel() }
    }

    func handleScheduledCallback(eventLoop: some EventLoop) { finish(throwing: nil) }

    func didCancelScheduledCallback(eventLoop: some EventLoop) { finish(throwing: CancellationError()) }

    func cancel() {
        let (continuation, callback): (UnsafeContinuation<Void, any Error>?, NIOScheduledCallback?) = state.withLock { state in
            switch state {
            case .waiting(let continuation, let callback):
                state = .cancelled
                return (continuation, callback)
            case .idle:
                state = .cancelled
                return (nil, nil)
            case .cancelled, .done:
                return (nil, nil)
            }
        }
        callback?.cancel()
        continuation?.resume(throwing: CancellationError())
    }

    private func finish(throwing error: (any Error)?) {
        let continuation: UnsafeContinuation<Void, any Error>? = state.withLock { state in
            guard case .waiting(let continuation, _) = state else { return nil }
            state = .done
            return continuation
        }
        if let error { continuation?.resume(throwing: error) } else { continuation?.resume() }
    }
}
