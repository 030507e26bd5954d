import EventLoop
import Glibc
import Synchronization

/// One dedicated thread that runs submitted jobs in order: where the blocking work
/// (fsync of the token file) goes, so event loops never wait on the disk.
public final class BlockingWorker: Sendable {
    /// A name for logs, e.g. `token-store`.
    public let name: String
    private let queue = JobQueue()

    /// Starts the thread; failing to create one (resource exhaustion at startup) traps.
    public init(name: String) {
        self.name = name
        // The thread holds only the queue, so dropping the last worker reference still runs deinit.
        let thread: pthread_t
        do { thread = try Threads.spawn { [queue] in queue.runUntilStopped() } } catch {
            fatalError("\(name): \(error)")
        }
        queue.state.withLock { $0.thread = thread }
    }

    deinit { shutdown() }

    /// Queues `job` to run after every job submitted before it; returns false (and drops
    /// the job) once `shutdown` has begun.
    @discardableResult
    public func submit(_ job: @escaping @Sendable () -> Void) -> Bool {
        let accepted = queue.state.withLock { state -> Bool in
            guard !state.stopping else { return false }
            state.jobs.append(job)
            return true
        }
        if accepted { queue.wakeups.post() }
        return accepted
    }

    /// Runs every queued job, then stops and joins the thread. Idempotent; callable from a
    /// job, in which case the thread is detached instead, since it cannot join itself.
    public func shutdown() {
        let thread = queue.state.withLock { state -> pthread_t? in
            guard !state.stopping else { return nil }
            state.stopping = true
            defer { state.thread = nil }
            return state.thread
        }
        guard let thread else { return }
        queue.wakeups.post()
        if pthread_equal(thread, pthread_self()) != 0 {
            pthread_detach(thread)
        } else {
            pthread_join(thread, nil)
        }
    }
}

/// The jobs and the semaphore that counts them, shared by the worker and its thread.
private final class JobQueue: Sendable {
    struct State {
        var jobs: [@Sendable () -> Void] = []
        var head = 0
        var stopping = false
        var thread: pthread_t?
    }

    let state = Mutex(State())
    // One post per job plus one for shutdown. A counting semaphore pairs with `Mutex`;
    // a condition variable would need a pthread mutex instead.
    let wakeups = PosixSemaphore()

    func runUntilStopped() {
        while true {
            wakeups.wait()
            let job = state.withLock { state -> (@Sendable () -> Void)? in
                guard state.head < state.jobs.count else { return nil }
                let job = state.jobs[state.head]
                state.head += 1
                // Compact once the consumed prefix dominates, so the array does not grow forever.
                if state.head > 64, state.head * 2 > state.jobs.count {
                    state.jobs.removeFirst(state.head)
                    state.head = 0
                }
                return job
            }
            // Posts are counted, so a wakeup with no job is shutdown's, after the last job.
            guard let job else { return }
            job()
        }
    }
}
