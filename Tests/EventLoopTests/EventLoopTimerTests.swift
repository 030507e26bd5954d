import Glibc
import Synchronization
import Testing

@testable import EventLoop

/// SIGUSR1s delivered to a loop thread (`timerFiresThroughInterruptions`).
private let interruptionSignals = Atomic<Int>(0)

/// Switches every loop's wait to `epoll_pwait2` (`precise`) or to the millisecond fallback, and
/// returns what switches it back. The suite is serialized: its tests set this process-wide switch.
private func useWait(precise: Bool) -> () -> Void {
    let saved = Selector.precise.load(ordering: .relaxed)
    Selector.precise.store(precise, ordering: .relaxed)
    return { Selector.precise.store(saved, ordering: .relaxed) }
}

@Suite("EventLoop timers", .serialized)
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
        // Unless the next wait is bounded by this deadline, the loop would sleep until some other event.
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

    @Test(
        "a task due now runs before the timers of its turn, and one queued while tasks run comes next turn without a wait"
    )
    func dueTasksRunBeforeTimersAndNeverWait() throws {
        let loop = try EventLoop(name: "test")
        var order: [String] = []
        loop.schedule(at: loop.now) { order.append("timer") }
        loop.runDue {
            order.append("due")
            loop.runDue { order.append("due from due") }
        }
        loop.afterEvents {
            order.append("after")
            loop.runDue { order.append("due from after") }
        }
        let started = NanoTime.now()
        loop.runOnce(timeoutMilliseconds: 5000)
        #expect(order == ["due", "timer", "after"])
        loop.runOnce(timeoutMilliseconds: 5000)
        #expect(order == ["due", "timer", "after", "due from due", "due from after"])
        // Neither turn waited for its 5 s: a queued task ends the wait at once, as a due timer does.
        #expect(NanoTime.now().nanoseconds - started.nanoseconds < 1_000_000_000)
    }

    @Test(
        "timers fire at their deadline and the loop sleeps until then, with epoll_pwait2 and with the millisecond fallback",
        .serialized, arguments: [true, false])
    func timersFireOnTimeWithEitherWait(precise: Bool) throws {
        // The fallback is what a kernel before 5.11, or a seccomp profile without epoll_pwait2, gets.
        let restore = useWait(precise: precise)
        defer { restore() }
        let loop = try EventLoop(name: "test")
        let delays: [Int64] = [0, 1_500_000, 7_300_000, 20_000_000]
        let early = Atomic<Int>(0)
        let fired = Atomic<Int>(0)
        let worst = Atomic<Int64>(0)
        loop.execute {
            let start = NanoTime.now()
            for delay in delays {
                let deadline = NanoTime(nanoseconds: start.nanoseconds + delay)
                loop.schedule(at: deadline) {
                    let now = NanoTime.now().nanoseconds
                    if now < deadline.nanoseconds { early.add(1, ordering: .relaxed) }
                    let late = now - deadline.nanoseconds
                    if late > worst.load(ordering: .relaxed) { worst.store(late, ordering: .relaxed) }
                    if fired.add(1, ordering: .relaxed).newValue == delays.count { loop.stop() }
                }
            }
        }
        let thread = try Threads.spawn { loop.run() }
        var waited = 0
        while fired.load(ordering: .relaxed) < delays.count && waited < 300 {
            usleep(10_000)
            waited += 1
        }
        if fired.load(ordering: .relaxed) < delays.count { loop.execute { loop.stop() } }
        pthread_join(thread, nil)
        #expect(fired.load(ordering: .relaxed) == delays.count, "a timer never fired")
        #expect(early.load(ordering: .relaxed) == 0, "a timer fired before its deadline")
        // Late only by scheduling noise (and, in the fallback, the rounding to whole milliseconds).
        #expect(worst.load(ordering: .relaxed) < 250_000_000)
        // The loop slept until each deadline: a wait shorter than the time left (a millisecond
        // timeout rounded down) would spin through hundreds of iterations instead.
        #expect(loop.iterations < 40, "the loop spun \(loop.iterations) times waiting for 4 timers")
    }

    @Test(
        "a timer fires on time while signals keep interrupting the wait, with epoll_pwait2 and with the millisecond fallback",
        .serialized, arguments: [true, false])
    func timerFiresThroughInterruptions(precise: Bool) throws {
        let restore = useWait(precise: precise)
        defer { restore() }
        // A handler that only counts: each SIGUSR1 makes the loop's wait return EINTR.
        signal(SIGUSR1) { _ in interruptionSignals.add(1, ordering: .relaxed) }
        let before = interruptionSignals.load(ordering: .relaxed)
        let loop = try EventLoop(name: "test")
        let firedAfter = Atomic<Int64>(0)
        loop.execute {
            let start = NanoTime.now()
            loop.schedule(at: NanoTime(nanoseconds: start.nanoseconds + 200_000_000)) {
                firedAfter.store(NanoTime.now().nanoseconds - start.nanoseconds, ordering: .relaxed)
                loop.stop()
            }
        }
        let thread = try Threads.spawn {
            // The test runner's threads may block it; the loop thread must receive it.
            var set = sigset_t()
            sigemptyset(&set)
            sigaddset(&set, SIGUSR1)
            pthread_sigmask(SIG_UNBLOCK, &set, nil)
            loop.run()
        }
        // Interrupt every 50 ms for 1.5 s: a wait that restarted its whole timeout after each
        // interruption would fire only once the signals stop.
        for _ in 0..<30 where firedAfter.load(ordering: .relaxed) == 0 {
            pthread_kill(thread, SIGUSR1)
            usleep(50_000)
        }
        if firedAfter.load(ordering: .relaxed) == 0 { loop.execute { loop.stop() } }
        pthread_join(thread, nil)
        let elapsed = Double(firedAfter.load(ordering: .relaxed)) / 1e9
        #expect(interruptionSignals.load(ordering: .relaxed) > before, "no signal reached the loop thread")
        #expect(elapsed >= 0.2)
        #expect(elapsed < 0.6, "the timer fired after \(elapsed) s")
    }
}
