/// Identifies a scheduled timer so it can be cancelled.
public struct TimerID: Sendable, Hashable {
    let raw: UInt64
}

/// A binary min-heap of deadlines with lazy cancellation: cancelled entries stay in the
/// heap and are skipped when they surface, so cancel is O(1). When they outnumber the live
/// ones (a request timeout cancelled by every response would otherwise pile up for its whole
/// duration), the heap is rebuilt from the live entries: amortised O(1) per cancel.
///
/// Callbacks live in reusable slots; a `TimerID` is the slot and the slot's generation, so a
/// stale ID (its timer ran or was cancelled, the slot since reused) matches nothing. Several
/// timers are scheduled and cancelled per request: slots cost no hashing.
struct TimerHeap {
    private struct Entry {
        var deadline: NanoTime
        var id: UInt64
    }

    private struct Slot {
        var generation: UInt32 = 0
        var callback: (() -> Void)?
    }

    private var heap: [Entry] = []
    private var slots: [Slot] = []
    private var freeSlots: [Int] = []
    private var live = 0

    /// The slot of a live timer `id`, or nil when it ran or was cancelled.
    private func slot(of id: UInt64) -> Int? {
        let index = Int(truncatingIfNeeded: id & 0xFFFF_FFFF)
        guard index < slots.count, slots[index].generation == UInt32(truncatingIfNeeded: id >> 32),
            slots[index].callback != nil
        else { return nil }
        return index
    }

    /// The earliest live deadline, if any.
    mutating func earliest() -> NanoTime? {
        while let top = heap.first, slot(of: top.id) == nil { pop() }
        return heap.first?.deadline
    }

    mutating func schedule(at deadline: NanoTime, _ callback: @escaping () -> Void) -> TimerID {
        let index: Int
        if let free = freeSlots.popLast() {
            index = free
        } else {
            index = slots.count
            slots.append(Slot())
        }
        slots[index].generation &+= 1
        slots[index].callback = callback
        live += 1
        let id = UInt64(slots[index].generation) << 32 | UInt64(index)
        heap.append(Entry(deadline: deadline, id: id))
        siftUp(heap.count - 1)
        return TimerID(raw: id)
    }

    mutating func cancel(_ id: TimerID) {
        guard let index = slot(of: id.raw) else { return }
        _ = release(index)
        if heap.count > 64 && heap.count > 2 * live { compact() }
    }

    /// Entries in the heap, cancelled ones included (tests).
    var storedEntries: Int { heap.count }

    private mutating func release(_ index: Int) -> (() -> Void)? {
        let callback = slots[index].callback
        slots[index].callback = nil
        // A slot whose generation would wrap is retired, so no stale ID can ever match again
        // (one slot per four billion timers).
        if slots[index].generation != .max { freeSlots.append(index) }
        live -= 1
        return callback
    }

    private mutating func compact() {
        let slots = slots
        heap.removeAll { entry in
            let index = Int(truncatingIfNeeded: entry.id & 0xFFFF_FFFF)
            return slots[index].generation != UInt32(truncatingIfNeeded: entry.id >> 32) || slots[index].callback == nil
        }
        var index = heap.count / 2
        while index > 0 {
            index -= 1
            siftDown(index)
        }
    }

    /// Removes the timers due at `now` from the heap and returns them, earliest first. Each
    /// callback is taken with `take` just before it runs, so a timer that an earlier callback of
    /// the same batch cancelled does not run (its owner may be gone by then).
    mutating func popDue(at now: NanoTime) -> [TimerID] {
        var result: [TimerID] = []
        popDue(at: now, into: &result)
        return result
    }

    /// `popDue(at:)` appending to `result`, whose storage the loop reuses every iteration.
    mutating func popDue(at now: NanoTime, into result: inout [TimerID]) {
        while let top = heap.first, top.deadline <= now {
            pop()
            if slot(of: top.id) != nil { result.append(TimerID(raw: top.id)) }
        }
    }

    /// The callback of a popped timer, unless it was cancelled since.
    mutating func take(_ id: TimerID) -> (() -> Void)? {
        guard let index = slot(of: id.raw) else { return nil }
        return release(index)
    }

    var count: Int { live }

    private mutating func pop() {
        let last = heap.removeLast()
        guard !heap.isEmpty else { return }
        heap[0] = last
        siftDown(0)
    }

    private mutating func siftUp(_ index: Int) {
        var child = index
        while child > 0 {
            let parent = (child - 1) / 2
            guard heap[child].deadline < heap[parent].deadline else { return }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    private mutating func siftDown(_ index: Int) {
        var parent = index
        while true {
            let left = 2 * parent + 1, right = left + 1
            var smallest = parent
            if left < heap.count && heap[left].deadline < heap[smallest].deadline { smallest = left }
            if right < heap.count && heap[right].deadline < heap[smallest].deadline { smallest = right }
            guard smallest != parent else { return }
            heap.swapAt(parent, smallest)
            parent = smallest
        }
    }
}
