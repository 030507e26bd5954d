import Glibc
import Synchronization
import Testing

@testable import EventLoop

@Suite("LoopBound")
struct LoopBoundTests {
    @Test("a bound value carries its loop and is read on that loop's thread")
    func readOnItsLoop() throws {
        let loop = try EventLoop(name: "bound")
        final class Box { var hits = 0 }
        let bound = LoopBound(Box(), on: loop)
        #expect(bound.loop === loop)
        let seen = Atomic<Int>(0)
        loop.execute {
            bound.value.hits += 1
            seen.store(bound.value.hits, ordering: .relaxed)
            loop.stop()
        }
        let thread = try Threads.spawn { loop.run() }
        pthread_join(thread, nil)
        #expect(seen.load(ordering: .relaxed) == 1)
        // Before and after the loop runs, the thread that owns it may set up and tear down.
        #expect(loop.inLoop)
        #expect(bound.value.hits == 1)
    }
}
