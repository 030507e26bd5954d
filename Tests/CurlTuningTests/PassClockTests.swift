import CCurlTuning
import EventLoop
import Glibc
import Testing

@testable import CurlTuning
@testable import Upstream

/// A read of `clock` through the executable's `clock_gettime`, in nanoseconds.
private func read(_ clock: clockid_t = CLOCK_MONOTONIC) -> Int64 {
    var time = timespec()
    tuningOn()
    precondition(clockReadingPasses(clock, &time) == 0)
    return Int64(time.tv_sec) * 1_000_000_000 + Int64(time.tv_nsec)
}

@Suite("PassClock: libcurl's reads of the monotonic clock in one pass cost one vDSO call")
struct PassClockTests {
    /// A pass of a loop's (each test has its own); the suite holds the loop, as a client does.
    let loop: EventLoop
    let pass: CurlPass

    init() throws {
        loop = try EventLoop(name: "clock")
        pass = CurlPass(loop: loop)
    }

    @Test("reads in one pass move forward a nanosecond each, however long the pass takes")
    func readsInOnePass() {
        var answers: [Int64] = []
        pass.run {
            answers.append(read())
            usleep(2_000)
            answers.append(read())
            answers.append(read())
        }
        #expect(answers[1] == answers[0] + 1)
        #expect(answers[2] == answers[0] + 2)
    }

    @Test("the first read after body bytes moved is glibc's, so a deadline set then is after the sweep's now")
    func bodyBytesRefreshTheClock() {
        var sweep: Int64 = 0, afterBody: Int64 = 0, next: Int64 = 0
        pass.run {
            sweep = read()
            usleep(2_000)
            pass.bodyMoved()
            afterBody = read()
            next = read()
        }
        #expect(afterBody >= sweep + 1_000_000, "the 2 ms before the body bytes show")
        #expect(next == afterBody + 1)
    }

    @Test("a read after a pass, and the next pass's first, are later than every answer in it")
    func laterReadsAreLater() {
        var inPass: Int64 = 0
        pass.run {
            _ = read()
            usleep(2_000)
            inPass = read()
        }
        let after = read()
        #expect(after > inPass + 1_000_000, "outside a pass the clock is glibc's: the 2 ms slept show")
        var next: Int64 = 0
        pass.run { next = read() }
        #expect(next >= after)
    }

    @Test("a nested pass keeps the outer pass's clock")
    func nestedPassJoins() {
        var outer: Int64 = 0, inner: Int64 = 0
        pass.run {
            outer = read()
            pass.run { inner = read() }
        }
        #expect(inner == outer + 1)
    }

    @Test("other clocks are glibc's during a pass")
    func otherClocksPassThrough() {
        var before: Int64 = 0, after: Int64 = 0
        pass.run {
            _ = read()
            before = read(CLOCK_REALTIME)
            usleep(2_000)
            after = read(CLOCK_REALTIME)
        }
        #expect(after - before >= 1_000_000)
    }

    @Test("reads on another thread during a pass are glibc's")
    func otherThreadsPassThrough() throws {
        final class Answers: @unchecked Sendable { var values: [Int64] = [] }
        let elsewhere = Answers()
        var failure: (any Error)?
        pass.run {
            _ = read()
            do {
                let thread = try Threads.spawn {
                    elsewhere.values.append(read())
                    usleep(2_000)
                    elsewhere.values.append(read())
                }
                pthread_join(thread, nil)
            } catch { failure = error }
        }
        #expect(failure == nil)
        #expect(elsewhere.values.count == 2 && elsewhere.values[1] - elsewhere.values[0] >= 1_000_000)
    }

    @Test(
        "a nanosecond after the last of a second carries into the next second",
        arguments: [(5, 999_999_998, 5, 999_999_999), (5, 999_999_999, 6, 0), (0, 0, 0, 1)])
    func nanosecondCarry(sec: Int, nsec: Int, nextSec: Int, nextNsec: Int) {
        let next = CurlPass.nanosecond(after: timespec(tv_sec: sec, tv_nsec: nsec))
        #expect(next.tv_sec == nextSec && next.tv_nsec == nextNsec)
    }
}
