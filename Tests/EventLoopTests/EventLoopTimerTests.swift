import Glibc
import Synchronization
import Testing
@testable import EventLoop

@Suite("EventLoop timers")
struct EventLoopTimerTests {
    @Test("a timer already due when an after-events task schedules it fires without waiting for other events")
    func dueTimerFromAfterEventsFiresPromptly() throws {
        let loop = try EventLoop(name: "test")
        let fired = Atomic<Int64>(0)
        let started = NanoTime.now()
        loop.execute {
            loop.afterEvents {
                // What curl does when a resumed transfer asks for a 0 ms timeout after the timers ran.
                loop.schedule(at: loop.now) {
                    fired.store(NanoTime.now().nanoseconds - started.nanoseconds, ordering: .relaxed)
                    loop.stop()
                }
            }
        }
        let thread = try Threads.spawn { loop.run() }
        // Without arming the timerfd the loop would sleep in epoll_wait until some other event.
        var waited = 0
        while fired.load(ordering: .relaxed) == 0 && waited < 200 {
            usleep(10_000)
            waited += 1
        }
        let elapsed = Double(fired.load(ordering: .relaxed)) / 1e9
        if elapsed == 0 { loop.execute { loop.stop() } }
        pthread_join(thread, nil)
        #expect(elapsed > 0, "the due timer never fired")
        #expect(elapsed < 0.5)
    }
}
