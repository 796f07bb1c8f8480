package import NIOCore

/// Runs Swift tasks on one NIO event loop, so that a load loop and the connections it drives
/// share a thread: an answer read in the loop resumes its task without waking another thread.
package final class EventLoopExecutor: TaskExecutor {
    let loop: any EventLoop

    package init(_ loop: any EventLoop) { self.loop = loop }

    package func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        loop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}
