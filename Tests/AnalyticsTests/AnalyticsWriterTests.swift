import Glibc
import Synchronization
import Testing

@testable import Analytics

/// A counting semaphore for tests: a gate to hold the writer thread, or a wait for a completion.
final class WriterTestSemaphore: @unchecked Sendable {
    // sem_post and sem_wait are thread-safe, and the pointer never changes.
    private let sem = UnsafeMutablePointer<sem_t>.allocate(capacity: 1)
    init() { sem_init(sem, 0, 0) }
    deinit {
        sem_destroy(sem)
        sem.deallocate()
    }
    func post() { sem_post(sem) }
    func wait() { while sem_wait(sem) == -1 && errno == EINTR {} }
}

/// Runs `body(index)` on `count` new pthreads at once and joins them all.
func runOnThreads(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) {
    final class Start {
        let run: () -> Void
        init(_ run: @escaping () -> Void) { self.run = run }
    }
    var threads: [pthread_t] = []
    for index in 0..<count {
        let box = Unmanaged.passRetained(Start { body(index) }).toOpaque()
        var thread = pthread_t()
        let result = pthread_create(
            &thread, nil,
            { arg in
                Unmanaged<Start>.fromOpaque(arg!).takeRetainedValue().run()
                return nil
            }, box)
        precondition(result == 0, "pthread_create failed")
        threads.append(thread)
    }
    for thread in threads { pthread_join(thread, nil) }
}

/// Monotonic nanoseconds.
func monotonicNanoseconds() -> Int64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
}

/// Parks the writer thread in a job until the returned gate is posted, and returns only once it
/// is parked: whatever is appended meanwhile waits in the queue as one group. `then` runs on
/// release, still inside the job.
func holdWriter(
    _ writer: AnalyticsWriter,
    then: @escaping @Sendable (AnalyticsStore) -> Void = { _ in }
) -> WriterTestSemaphore {
    let gate = WriterTestSemaphore()
    let parked = WriterTestSemaphore()
    writer.perform { store in
        parked.post()
        gate.wait()
        then(store)
    }
    parked.wait()
    return gate
}

@Suite("Analytics writer", .serialized)
struct AnalyticsWriterTests {
    @Test("200 concurrent appends from 8 threads share one commit; each completion runs once, successfully")
    func groupCommit() throws {
        let dir = AnalyticsTestDirectory()
        let writer = AnalyticsWriter(store: try AnalyticsStore(path: dir.database))
        // Hold the writer thread so every append is queued before it looks: one group, one commit.
        let gate = holdWriter(writer)
        let calls = Mutex([Int: Int]())
        let failures = Mutex(0)
        let callerThreads = Mutex(Set<UInt>())
        let writerThread = Mutex<pthread_t?>(nil)
        runOnThreads(8) { thread in
            callerThreads.withLock { _ = $0.insert(UInt(pthread_self())) }
            for i in 0..<25 {
                let id = thread * 25 + i
                writer.append([
                    sampleEvent("s\(thread)", Int64(i), "\(id)"), sampleEvent("s\(thread)", Int64(i), "\(id)b"),
                ]) { result in
                    if case .failure = result { failures.withLock { $0 += 1 } }
                    calls.withLock { $0[id, default: 0] += 1 }
                    writerThread.withLock { $0 = pthread_self() }
                }
            }
        }
        #expect(writer.commits == 0)
        gate.post()
        let drained = WriterTestSemaphore()
        writer.perform { _ in drained.post() }
        drained.wait()
        let counts = calls.withLock { $0 }
        #expect(counts.count == 200)
        #expect(counts.values.allSatisfy { $0 == 1 })
        #expect(failures.withLock { $0 } == 0)
        #expect(writer.commits == 1)
        #expect(writer.appendedEvents == 400)
        let ranOn = try #require(writerThread.withLock { $0 })
        #expect(!callerThreads.withLock { $0 }.contains(UInt(ranOn)))
        writer.shutdown()
        #expect(try AnalyticsStore(path: dir.database).count() == 400)
    }

    @Test("unheld concurrent appends still commit in far fewer transactions than appends")
    func groupCommitUnderLoad() throws {
        let dir = AnalyticsTestDirectory()
        let writer = AnalyticsWriter(store: try AnalyticsStore(path: dir.database))
        let done = Atomic(0)
        runOnThreads(8) { thread in
            for i in 0..<25 {
                writer.append([sampleEvent("s", 1, "\(thread).\(i)")]) { result in
                    if case .success = result { done.add(1, ordering: .relaxed) }
                }
            }
        }
        writer.shutdown()
        let completions = done.load(ordering: .relaxed)
        #expect(completions == 200)
        #expect(writer.appendedEvents == 200)
        #expect(writer.commits < 200)
        print("group commit, unheld: 200 appends from 8 threads -> \(writer.commits) commits")
    }

    @Test("perform runs in order with appends: it sees everything appended before it, nothing after")
    func performOrder() throws {
        let dir = AnalyticsTestDirectory()
        let writer = AnalyticsWriter(store: try AnalyticsStore(path: dir.database))
        let log = Mutex<[String]>([])
        for round in 1...3 {
            writer.append([sampleEvent("a", 1, "\(round)"), sampleEvent("a", 1, "\(round)")]) { _ in
                log.withLock { $0.append("append \(round)") }
            }
            writer.perform { store in
                let count = (try? store.count()) ?? -1
                log.withLock { $0.append("job sees \(count)") }
            }
        }
        writer.perform { store in
            if let batch = try? store.oldestBatch(limit: 100) { try? store.delete(ids: batch.map(\.id)) }
        }
        writer.perform { store in log.withLock { $0.append("after delete \((try? store.count()) ?? -1)") } }
        writer.shutdown()
        #expect(
            log.withLock { $0 } == [
                "append 1", "job sees 2", "append 2", "job sees 4", "append 3", "job sees 6", "after delete 0",
            ])
        #expect(writer.commits == 3)
    }

    @Test("shutdown drains queued work, closes the store, then refuses more")
    func shutdownDrains() throws {
        let dir = AnalyticsTestDirectory()
        let writer = AnalyticsWriter(store: try AnalyticsStore(path: dir.database))
        let gate = holdWriter(writer)
        let completed = Atomic(0)
        for i in 0..<50 {
            writer.append([sampleEvent("a", Int64(i), "\(i)")]) { result in
                if case .success = result { completed.add(1, ordering: .relaxed) }
            }
        }
        let sawStore = Atomic(false)
        writer.perform { store in sawStore.store((try? store.count()) == 50, ordering: .relaxed) }
        gate.post()
        writer.shutdown()
        let completions = completed.load(ordering: .relaxed)
        #expect(completions == 50)
        let jobSawAll = sawStore.load(ordering: .relaxed)
        #expect(jobSawAll)

        let refused = Mutex<AnalyticsStoreError?>(nil)
        writer.append([sampleEvent("a", 1, "late")]) { result in
            if case .failure(let error) = result { refused.withLock { $0 = error } }
        }
        #expect(refused.withLock { $0 }?.isClosed == true)
        #expect(!writer.perform { _ in })
        writer.shutdown()
        #expect(try AnalyticsStore(path: dir.database).count() == 50)
    }

    @Test("a failed group fails every append in it; the writer keeps going")
    func failedGroup() throws {
        let dir = AnalyticsTestDirectory()
        let writer = AnalyticsWriter(store: try AnalyticsStore(path: dir.database))
        // Closing the store under the writer makes the next transaction fail.
        let gate = holdWriter(writer) { store in store.close() }
        let outcomes = Mutex<[Bool]>([])
        for i in 0..<5 {
            writer.append([sampleEvent("a", 1, "\(i)")]) { result in
                outcomes.withLock { $0.append((try? result.get()) != nil) }
            }
        }
        gate.post()
        writer.shutdown()
        #expect(outcomes.withLock { $0 } == [false, false, false, false, false])
        #expect(writer.commits == 0)
        #expect(writer.appendedEvents == 0)
    }

    @Test("empty appends complete without a transaction")
    func emptyAppend() throws {
        let dir = AnalyticsTestDirectory()
        let writer = AnalyticsWriter(store: try AnalyticsStore(path: dir.database))
        let ok = Atomic(false)
        writer.append([]) { result in ok.store((try? result.get()) != nil, ordering: .relaxed) }
        writer.shutdown()
        let succeeded = ok.load(ordering: .relaxed)
        #expect(succeeded)
        #expect(writer.commits == 0)
    }

    @Test("a job may shut its own writer down without deadlocking")
    func shutdownFromJob() throws {
        let dir = AnalyticsTestDirectory()
        let writer = AnalyticsWriter(store: try AnalyticsStore(path: dir.database))
        let done = WriterTestSemaphore()
        writer.perform { [writer] _ in writer.shutdown() }
        writer.append([sampleEvent("a", 1, "x")]) { _ in done.post() }
        done.wait()
        #expect(!writer.perform { _ in })
    }

    @Test("throughput: 100k events in appends of 10 from 64 threads (printed, not asserted)")
    func throughput() throws {
        // The sidecar records for its one logged-in user; 64 subjects shows the index's worst case.
        for subjects in [1, 64] {
            let dir = AnalyticsTestDirectory()
            let report = try measureWriter(path: dir.database, subjects: subjects)
            print("writer, \(subjects) subject(s): \(report)")
        }
        // Baseline: the store alone, the same 100k rows in transactions the size of a full group.
        let dir = AnalyticsTestDirectory()
        let store = try AnalyticsStore(path: dir.database)
        let group = (0..<640).map {
            NewEvent(
                subject: "user", key: "pennmobile.bench.event.e\($0 % 10)",
                value: "\($0)", timestamp: 1_700_000_000)
        }
        let start = monotonicNanoseconds()
        for _ in 0..<(100_000 / 640 + 1) { try store.append(group) }
        let elapsed = Double(monotonicNanoseconds() - start) / 1e9
        print("store alone: \(Int(Double(try store.count()) / elapsed)) rows/s in transactions of 640")
    }
}

/// 64 client threads each append 10 events and wait for the completion, until 10,000 appends
/// (100k events) are durable; returns rows/s, commits and acknowledgement latency.
private func measureWriter(path: String, subjects: Int) throws -> String {
    let writer = AnalyticsWriter(store: try AnalyticsStore(path: path))
    let appends = 10_000
    let next = Atomic(0)
    let latencies = Mutex<[Int64]>([])
    let failures = Atomic(0)
    let start = monotonicNanoseconds()
    runOnThreads(64) { client in
        let done = WriterTestSemaphore()
        var mine: [Int64] = []
        while case let n = next.add(1, ordering: .relaxed).oldValue, n < appends {
            let events = (0..<10).map {
                NewEvent(
                    subject: "user\(client % subjects)", key: "pennmobile.bench.event.e\($0)", value: "\(n)",
                    timestamp: 1_700_000_000 + Int64(n / 1000))
            }
            let sent = monotonicNanoseconds()
            writer.append(events) { result in
                if case .failure = result { failures.add(1, ordering: .relaxed) }
                done.post()
            }
            done.wait()
            mine.append(monotonicNanoseconds() - sent)
        }
        latencies.withLock { $0 += mine }
    }
    let elapsed = Double(monotonicNanoseconds() - start) / 1e9
    writer.shutdown()
    let sorted = latencies.withLock { $0 }.sorted()
    func ms(_ quantile: Double) -> String {
        let tenths = sorted[min(sorted.count - 1, Int(Double(sorted.count) * quantile))] / 100_000
        return "\(tenths / 10).\(tenths % 10) ms"
    }
    let rows = writer.appendedEvents
    let commits = writer.commits
    return "\(rows) events in \(Int(elapsed * 1000)) ms = \(Int(Double(rows) / elapsed)) events/s; "
        + "\(commits) commits (\(Int(Double(commits) / elapsed)) fsyncs/s, \(rows / max(commits, 1)) events each); "
        + "ack p50 \(ms(0.5)), p99 \(ms(0.99)); failures \(failures.load(ordering: .relaxed))"
}
