import EventLoop
import Glibc
import Synchronization

/// The one thread that owns the `AnalyticsStore`, so event loops never wait on its fsyncs.
/// Group commit: every append queued while a transaction was on disk goes into the next one,
/// so many concurrent posts share one fsync.
public final class AnalyticsWriter: Sendable {
    private let queue = WriterQueue()

    /// Starts the writer thread, which takes ownership of `store` (use it only through `perform`
    /// from now on) and closes it at `shutdown`. Failing to create a thread traps.
    public init(store: AnalyticsStore) {
        // The thread holds the queue and the store, never the writer, so dropping the last
        // writer reference still runs deinit (which drains and joins).
        nonisolated(unsafe) let store = store  // handed to the writer thread, used only there
        let thread: pthread_t
        do { thread = try Threads.spawn { [queue] in queue.run(store) } } catch {
            fatalError("analytics writer: \(error)")
        }
        queue.state.withLock { $0.thread = thread }
    }

    deinit { shutdown() }

    /// Group commit: every append waiting when the thread wakes goes into one transaction; after
    /// COMMIT returns, each completion runs (on the writer thread — callers hop to their loop
    /// themselves), in submission order. After `shutdown`, `completion` runs at once, on the
    /// caller's thread, with a `.closed` error.
    public func append(
        _ events: [NewEvent],
        completion: @escaping @Sendable (Result<Void, AnalyticsStoreError>) -> Void
    ) {
        if !queue.submit(.append(events, completion)) {
            completion(.failure(.closed("AnalyticsWriter.append")))
        }
    }

    /// Runs `job` on the writer thread, in order with appends (uploads read/delete through this):
    /// every append submitted before it is committed when it runs. Returns false, dropping the
    /// job, once `shutdown` has begun.
    @discardableResult
    public func perform(_ job: @escaping @Sendable (AnalyticsStore) -> Void) -> Bool {
        queue.submit(.job(job))
    }

    /// Transactions committed (≈ fsyncs of the WAL), for metrics and the benchmark.
    public var commits: Int { queue.commits.load(ordering: .relaxed) }

    /// Events committed through `append`.
    public var appendedEvents: Int { queue.appendedEvents.load(ordering: .relaxed) }

    /// Runs everything queued, closes the store and joins the thread. Idempotent; callable from a
    /// job or completion, in which case the thread is detached instead, since it cannot join itself.
    public func shutdown() {
        let thread = queue.state.withLock { state -> pthread_t? in
            guard !state.stopping else { return nil }
            state.stopping = true
            defer { state.thread = nil }
            return state.thread
        }
        guard let thread else { return }
        queue.wake()
        if pthread_equal(thread, pthread_self()) != 0 {
            pthread_detach(thread)
        } else {
            pthread_join(thread, nil)
        }
    }
}
