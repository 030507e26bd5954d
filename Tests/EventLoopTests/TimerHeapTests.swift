import Testing

@testable import EventLoop

private func ns(_ n: Int64) -> NanoTime { NanoTime(nanoseconds: n) }

/// Runs the callbacks due at `now` and returns the tags they recorded.
private func fire(_ heap: inout TimerHeap, at now: Int64, _ log: FiredLog) -> [Int] {
    log.fired = []
    for id in heap.popDue(at: ns(now)) {
        if let callback = heap.take(id) { callback() }
    }
    return log.fired
}

@Suite("TimerHeap")
struct TimerHeapTests {
    @Test("timers come due in deadline order, not scheduling order")
    func dueOrder() {
        var heap = TimerHeap()
        let log = FiredLog()
        for (tag, deadline) in [(3, 300), (1, 100), (5, 500), (2, 200), (4, 400)] as [(Int, Int64)] {
            _ = heap.schedule(at: ns(deadline)) { log.fired.append(tag) }
        }
        #expect(heap.count == 5)
        #expect(heap.earliest() == ns(100))
        #expect(fire(&heap, at: 99, log) == [])
        #expect(fire(&heap, at: 250, log) == [1, 2])
        #expect(heap.earliest() == ns(300))
        #expect(fire(&heap, at: 1_000, log) == [3, 4, 5])
        #expect(heap.count == 0)
        #expect(heap.earliest() == nil)
    }

    @Test("a stale timer ID cancels nothing once its slot holds another timer")
    func staleIDAfterSlotReuse() {
        var heap = TimerHeap()
        let log = FiredLog()
        let first = heap.schedule(at: ns(100)) { log.fired.append(1) }
        heap.cancel(first)
        let second = heap.schedule(at: ns(200)) { log.fired.append(2) }
        #expect(second != first)
        heap.cancel(first)
        #expect(heap.take(first) == nil)
        #expect(heap.count == 1)
        #expect(heap.earliest() == ns(200))
        #expect(fire(&heap, at: 300, log) == [2])
        // Ran: its ID is stale too.
        heap.cancel(second)
        _ = heap.schedule(at: ns(400)) { log.fired.append(3) }
        heap.cancel(second)
        #expect(fire(&heap, at: 500, log) == [3])
    }

    @Test("a deadline equal to now is due")
    func deadlineEqualToNowIsDue() {
        var heap = TimerHeap()
        let log = FiredLog()
        _ = heap.schedule(at: ns(100)) { log.fired.append(1) }
        #expect(fire(&heap, at: 100, log) == [1])
    }

    @Test("timers with equal deadlines all fire together, exactly once")
    func equalDeadlines() {
        var heap = TimerHeap()
        let log = FiredLog()
        for tag in 1...5 { _ = heap.schedule(at: ns(100)) { log.fired.append(tag) } }
        _ = heap.schedule(at: ns(50)) { log.fired.append(0) }
        #expect(fire(&heap, at: 99, log) == [0])
        #expect(fire(&heap, at: 100, log).sorted() == [1, 2, 3, 4, 5])
        #expect(fire(&heap, at: 1_000, log) == [])
    }

    @Test("timers cancelled long before their deadline do not pile up, and order survives the rebuild")
    func cancelledEntriesAreCompacted() {
        var heap = TimerHeap()
        let log = FiredLog()
        var live: [Int] = []
        for tag in 0..<10_000 {
            // Every request's 30 s head timeout, cancelled when its response comes.
            let id = heap.schedule(at: ns(Int64(30_000 + (tag * 7919) % 10_000))) { log.fired.append(tag) }
            if tag % 100 == 0 { live.append(tag) } else { heap.cancel(id) }
        }
        #expect(heap.count == 100)
        #expect(heap.storedEntries <= 2 * 100 + 64)
        let fired = fire(&heap, at: 1_000_000, log)
        #expect(fired.sorted() == live)
        let deadlines = fired.map { 30_000 + ($0 * 7919) % 10_000 }
        #expect(deadlines == deadlines.sorted())
    }

    @Test("a timer cancelled by an earlier callback of the same batch does not run")
    func cancelWithinBatch() {
        var heap = TimerHeap()
        let log = FiredLog()
        var second: TimerID?
        // Both due together: the first (a connection closing) cancels the second (its transfer's
        // head timeout, whose owner is freed by then).
        _ = heap.schedule(at: ns(100)) { log.fired.append(1) }
        second = heap.schedule(at: ns(100)) { log.fired.append(2) }
        let due = heap.popDue(at: ns(100))
        #expect(due.count == 2)
        for id in due {
            guard let callback = heap.take(id) else { continue }
            callback()
            if let other = second, other != id { heap.cancel(other) }
            second = nil
        }
        #expect(log.fired.count == 1)
        #expect(heap.count == 0)
    }

    @Test("a cancelled timer never fires and no longer counts")
    func cancelSkipped() {
        var heap = TimerHeap()
        let log = FiredLog()
        _ = heap.schedule(at: ns(100)) { log.fired.append(1) }
        let cancelled = heap.schedule(at: ns(200)) { log.fired.append(2) }
        _ = heap.schedule(at: ns(300)) { log.fired.append(3) }
        heap.cancel(cancelled)
        #expect(heap.count == 2)
        #expect(fire(&heap, at: 1_000, log) == [1, 3])
        // Cancelling again, or after firing, is harmless.
        heap.cancel(cancelled)
        #expect(heap.count == 0)
    }

    @Test("earliest() skips cancelled timers at the top")
    func earliestSkipsCancelled() {
        var heap = TimerHeap()
        let first = heap.schedule(at: ns(100)) {}
        let second = heap.schedule(at: ns(200)) {}
        _ = heap.schedule(at: ns(300)) {}
        heap.cancel(first)
        #expect(heap.earliest() == ns(200))
        heap.cancel(second)
        #expect(heap.earliest() == ns(300))
    }

    @Test("earliest() is nil when every timer is cancelled")
    func earliestAllCancelled() {
        var heap = TimerHeap()
        let ids = (1...4).map { heap.schedule(at: ns(Int64($0) * 10)) {} }
        for id in ids { heap.cancel(id) }
        #expect(heap.earliest() == nil)
        #expect(heap.count == 0)
    }

    @Test("timer IDs are distinct")
    func distinctIDs() {
        var heap = TimerHeap()
        let ids = (0..<100).map { _ in heap.schedule(at: ns(1)) {} }
        #expect(Set(ids).count == 100)
    }

    @Test("many random deadlines, some cancelled, come out sorted")
    func randomDeadlinesSorted() {
        var rng = SeededGenerator(seed: 0x5EED)
        var heap = TimerHeap()
        let log = FiredLog()
        var deadlines: [Int: Int64] = [:]
        var ids: [Int: TimerID] = [:]
        for tag in 0..<2_000 {
            let deadline = Int64.random(in: 0..<500, using: &rng)
            deadlines[tag] = deadline
            ids[tag] = heap.schedule(at: ns(deadline)) { log.fired.append(tag) }
        }
        var live = Set(0..<2_000)
        for tag in 0..<2_000 where Bool.random(using: &rng) && tag % 3 == 0 {
            heap.cancel(ids[tag]!)
            live.remove(tag)
        }
        #expect(heap.count == live.count)

        // Drain in random steps; every step's output and the whole sequence stay sorted.
        var now: Int64 = -1
        var all: [Int] = []
        while now < 600 {
            now += Int64.random(in: 1...40, using: &rng)
            let step = fire(&heap, at: now, log)
            #expect(step.allSatisfy { deadlines[$0]! <= now })
            if let next = heap.earliest() { #expect(next.nanoseconds > now) }
            all += step
        }
        let order = all.map { deadlines[$0]! }
        #expect(order == order.sorted())
        #expect(Set(all) == live)
        #expect(all.count == live.count)
    }
}
