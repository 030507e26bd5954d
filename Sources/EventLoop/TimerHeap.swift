/// Identifies a scheduled timer so it can be cancelled.
public struct TimerID: Sendable, Hashable {
    let raw: UInt64
}

/// A binary min-heap of deadlines with lazy cancellation: cancelled entries stay in the
/// heap and are skipped when they surface, so cancel is O(1). When they outnumber the live
/// ones (a request timeout cancelled by every response would otherwise pile up for its whole
/// duration), the heap is rebuilt from the live entries: amortised O(1) per cancel.
struct TimerHeap {
    private struct Entry {
        var deadline: NanoTime
        var id: UInt64
    }

    private var heap: [Entry] = []
    private var callbacks: [UInt64: () -> Void] = [:]
    private var nextID: UInt64 = 1

    /// The earliest live deadline, if any.
    mutating func earliest() -> NanoTime? {
        while let top = heap.first, callbacks[top.id] == nil { pop() }
        return heap.first?.deadline
    }

    mutating func schedule(at deadline: NanoTime, _ callback: @escaping () -> Void) -> TimerID {
        let id = nextID
        nextID += 1
        callbacks[id] = callback
        heap.append(Entry(deadline: deadline, id: id))
        siftUp(heap.count - 1)
        return TimerID(raw: id)
    }

    mutating func cancel(_ id: TimerID) {
        guard callbacks.removeValue(forKey: id.raw) != nil else { return }
        if heap.count > 64 && heap.count > 2 * callbacks.count { compact() }
    }

    /// Entries in the heap, cancelled ones included (tests).
    var storedEntries: Int { heap.count }

    private mutating func compact() {
        heap.removeAll { callbacks[$0.id] == nil }
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
        while let top = heap.first, top.deadline <= now {
            pop()
            if callbacks[top.id] != nil { result.append(TimerID(raw: top.id)) }
        }
        return result
    }

    /// The callback of a popped timer, unless it was cancelled since.
    mutating func take(_ id: TimerID) -> (() -> Void)? { callbacks.removeValue(forKey: id.raw) }

    var count: Int { callbacks.count }

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
