import Glibc
import Synchronization
import Testing

@testable import Credentials

@Suite("Blocking worker")
struct BlockingWorkerTests {
    @Test("jobs run in submission order, all on one thread that is not the caller's")
    func orderAndThread() {
        let worker = BlockingWorker(name: "test-worker")
        let log = Mutex<[(Int, pthread_t)]>([])
        for i in 0..<500 {
            worker.submit { log.withLock { $0.append((i, pthread_self())) } }
        }
        worker.shutdown()
        let entries = log.withLock { $0 }
        #expect(entries.map(\.0) == Array(0..<500))
        let threads = Set(entries.map(\.1))
        #expect(threads.count == 1)
        #expect(threads.first.map { pthread_equal($0, pthread_self()) == 0 } == true)
    }

    @Test("shutdown waits for queued slow jobs, then refuses new ones")
    func shutdownDrains() {
        let worker = BlockingWorker(name: "drain")
        let done = Mutex(0)
        for _ in 0..<5 {
            worker.submit {
                usleep(20_000)
                done.withLock { $0 += 1 }
            }
        }
        worker.shutdown()
        #expect(done.withLock { $0 } == 5)
        #expect(!worker.submit { done.withLock { $0 += 100 } })
        worker.shutdown()
        #expect(done.withLock { $0 } == 5)
    }

    @Test("a job may shut its own worker down without deadlocking")
    func shutdownFromJob() {
        let worker = BlockingWorker(name: "self-stop")
        let ran = Mutex(false)
        let bothQueued = Mutex(false)
        // The stopping job waits until the second job is queued: a shutdown that ran first
        // would rightly refuse it, which is not what this test is about.
        worker.submit { [worker] in
            while !bothQueued.withLock({ $0 }) { usleep(100) }
            worker.shutdown()
        }
        worker.submit { ran.withLock { $0 = true } }
        bothQueued.withLock { $0 = true }
        // The job's shutdown drains: the second job runs before the thread exits.
        var waited = 0
        while !ran.withLock({ $0 }), waited < 5_000 { usleep(1_000); waited += 1 }
        #expect(ran.withLock { $0 })
        #expect(!worker.submit {})
    }

    @Test("a dropped worker stops its thread after running what was queued")
    func deinitDrains() {
        let ran = Mutex(0)
        do {
            let worker = BlockingWorker(name: "dropped")
            for _ in 0..<3 {
                worker.submit {
                    usleep(5_000); ran.withLock { $0 += 1 }
                }
            }
        }
        #expect(ran.withLock { $0 } == 3)
    }
}
