import EventLoop
import Glibc
import Synchronization

/// Work for the writer thread, run in submission order.
enum WriterItem: Sendable {
    /// Events to commit, and who to tell once they are durable.
    case append([NewEvent], @Sendable (Result<Void, AnalyticsStoreError>) -> Void)
    /// A job that reads or deletes through the store.
    case job(@Sendable (AnalyticsStore) -> Void)
}

/// The pending work, shared by the writer's callers and its thread.
final class WriterQueue: Sendable {
    struct State {
        var pending: [WriterItem] = []
        /// The thread found nothing to do and waits (or is about to) on `wakeups`.
        var sleeping = false
        var stopping = false
        var thread: pthread_t?
    }

    let state = Mutex(State())
    /// Posted only to end a sleep, so a burst of appends costs one wakeup, not one each.
    private let wakeups = PosixSemaphore()
    let commits = Atomic(0)
    let appendedEvents = Atomic(0)

    /// Queues `item`; false once stopping.
    func submit(_ item: WriterItem) -> Bool {
        let (accepted, wake) = state.withLock { state -> (Bool, Bool) in
            guard !state.stopping else { return (false, false) }
            state.pending.append(item)
            defer { state.sleeping = false }
            return (true, state.sleeping)
        }
        if wake { wakeups.post() }
        return accepted
    }

    /// Ends the thread's sleep if it is sleeping (shutdown's nudge).
    func wake() {
        let wake = state.withLock { state -> Bool in
            defer { state.sleeping = false }
            return state.sleeping
        }
        if wake { wakeups.post() }
    }

    /// The thread: takes everything pending at each wake, runs it, sleeps when there is nothing;
    /// after shutdown, once the queue is empty, closes the store and returns.
    func run(_ store: AnalyticsStore) {
        // Two arrays trade places with `pending`, so neither is reallocated in the steady state.
        var batch: [WriterItem] = []
        var groups: [[NewEvent]] = []
        while true {
            enum Next { case work, sleep, stop }
            let next = state.withLock { state -> Next in
                if state.pending.isEmpty {
                    if state.stopping { return .stop }
                    state.sleeping = true
                    return .sleep
                }
                swap(&state.pending, &batch)
                return .work
            }
            switch next {
            case .sleep:
                wakeups.wait()
            case .stop:
                store.close()
                return
            case .work:
                process(batch, store, &groups)
                batch.removeAll(keepingCapacity: true)
            }
        }
    }

    /// Commits each run of appends as one transaction, and runs jobs between them in order.
    private func process(_ batch: [WriterItem], _ store: AnalyticsStore, _ groups: inout [[NewEvent]]) {
        var start = batch.startIndex
        for index in batch.indices {
            guard case .job(let job) = batch[index] else { continue }
            commit(batch[start..<index], store, &groups)
            job(store)
            start = index + 1
        }
        commit(batch[start...], store, &groups)
    }

    /// One transaction for a run of appends; every completion in the run gets its result, after COMMIT.
    private func commit(_ items: ArraySlice<WriterItem>, _ store: AnalyticsStore, _ groups: inout [[NewEvent]]) {
        var events = 0
        for case .append(let batch, _) in items {
            groups.append(batch)
            events += batch.count
        }
        guard !items.isEmpty else { return }
        let result: Result<Void, AnalyticsStoreError>
        if events == 0 {
            result = .success(())
        } else {
            result = Result { () throws(AnalyticsStoreError) in try store.append(batches: groups) }
            if case .success = result {
                commits.add(1, ordering: .relaxed)
                appendedEvents.add(events, ordering: .relaxed)
            }
        }
        groups.removeAll(keepingCapacity: true)
        for case .append(_, let completion) in items { completion(result) }
    }
}
