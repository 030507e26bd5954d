import CLinux
import Glibc
import Synchronization

/// Something registered with a loop that reacts to readiness.
public protocol Selectable: AnyObject {
    /// Called on the loop thread with the epoll event bits.
    func ready(_ events: UInt32)
}

/// One epoll loop on one thread: it owns its descriptors, its timers and everything
/// registered with it. Only `execute` and `wakeup` may be called from other threads.
public final class EventLoop: @unchecked Sendable {
    private let selector: Selector
    private let wakeFD: CInt
    /// Timers need no descriptor: each wait ends by the earliest deadline (`epoll_pwait2`), so
    /// scheduling and cancelling cost no system call (`bench/cost-profile.sh` counts the calls).
    private var timers = TimerHeap()
    private var dueTimers: [TimerID] = []
    private var registrations: [(generation: UInt32, target: (any Selectable)?)] = []
    private var nextGeneration: UInt32 = 1
    private let inbox = Mutex<[@Sendable () -> Void]>([])
    /// A closure in a struct: an array of bare closures stores each in the generic (indirect
    /// result) form, so every append would allocate a reabstraction thunk; a struct field keeps the
    /// closure as it was made (one allocation per after-events task saved, every request).
    private struct Task {
        let run: () -> Void
    }

    private var afterIteration: [Task] = []
    /// Tasks due at once (`runDue`), and the batch of them being run (swapped, like the
    /// after-events tasks, so neither array is reallocated).
    private var dueNow: [Task] = []
    private var runningDue: [Task] = []
    /// The batch of after-events tasks being run; swapped with `afterIteration` so neither array
    /// is reallocated per iteration (tasks a task adds go to the next batch).
    private var runningTasks: [Task] = []
    private var atStop: [() -> Void] = []
    private var running = true
    /// The thread running `run` (a `pthread_t`); 0 before it starts and after it stops, when
    /// the thread that creates or joins the loop may set it up or tear it down.
    private let owner = Atomic<UInt>(0)
    /// The time the current iteration started: cheap and precise enough for deadlines.
    public private(set) var now = NanoTime.now()
    /// How many readiness events the current iteration is dispatching: 1 when a lone event woke
    /// the loop (low load), many under load, when the end of the iteration comes soon anyway.
    public private(set) var eventsInBatch = 0
    /// Iterations run so far: tests check that a loop waiting for a timer sleeps, not spins.
    public private(set) var iterations = 0
    /// Iterations whose batch of events has been dispatched: once this passes the iteration in
    /// which something happened, a wait begun after it has been seen through, every readiness
    /// it reported handled (`UpstreamClient` tells quiet parked connections by it).
    public private(set) var batchesDispatched = 0
    /// A name for logs, e.g. `loop-0`.
    public let name: String

    /// Creates a loop; call `run` on the thread that will own it.
    public init(name: String) throws(IOError) {
        self.name = name
        selector = try Selector()
        wakeFD = try syscall(where: "eventfd") { cl_eventfd() }
        try selector.register(fd: wakeFD, generation: 0, interest: .read)
    }

    deinit {
        closeDescriptor(wakeFD)
    }

    /// Whether the caller runs on this loop's thread (or the loop has not started yet, when
    /// the thread that creates it sets it up). Checked by `assertInLoop` in debug builds, as
    /// swift-nio's `NIOLoopBound` does: loop-confined state touched from another thread is a bug.
    public var inLoop: Bool {
        let thread = owner.load(ordering: .relaxed)
        return thread == 0 || pthread_equal(thread, pthread_self()) != 0
    }

    /// Traps in debug builds when called off the loop's thread; free in release builds.
    @inline(__always)
    public func assertInLoop(file: StaticString = #fileID, line: UInt = #line) {
        assert(inLoop, "\(name): called off its loop thread", file: file, line: line)
    }

    /// Registers `fd` for `interest`; events go to `target` until `deregister`.
    public func register(fd: CInt, interest: Interest, target: any Selectable, exclusive: Bool = false) throws(IOError)
    {
        assertInLoop()
        let generation = slot(for: fd)
        registrations[Int(fd)] = (generation, target)
        try selector.register(fd: fd, generation: generation, interest: interest, exclusive: exclusive)
    }

    /// (Re)claims `fd` for `target`: modifies an existing epoll entry, or adds one when the kernel
    /// has none (the descriptor was closed and its number reused). One syscall either way.
    public func claim(fd: CInt, interest: Interest, target: any Selectable) throws(IOError) {
        assertInLoop()
        let generation = slot(for: fd)
        registrations[Int(fd)] = (generation, target)
        do {
            try selector.reregister(fd: fd, generation: generation, interest: interest)
        } catch  where error.errnoCode == ENOENT {
            try selector.register(fd: fd, generation: generation, interest: interest)
        }
    }

    /// Changes the interest of a registered `fd`.
    public func reregister(fd: CInt, interest: Interest) throws(IOError) {
        assertInLoop()
        try selector.reregister(fd: fd, generation: registrations[Int(fd)].generation, interest: interest)
    }

    /// Stops delivering events for `fd`; call before closing it.
    public func deregister(fd: CInt) {
        assertInLoop()
        selector.deregister(fd: fd)
        registrations[Int(fd)].target = nil
    }

    /// Forgets `fd`'s registration without a syscall, for a descriptor about to be closed (or just
    /// closed) whose open file is not shared: closing it takes it out of the epoll set. Events
    /// already fetched for it are dropped, as after `deregister`.
    public func forget(fd: CInt) {
        assertInLoop()
        guard Int(fd) < registrations.count else { return }
        registrations[Int(fd)].target = nil
    }

    /// Schedules `callback` on this loop at `deadline`.
    @discardableResult
    public func schedule(at deadline: NanoTime, _ callback: @escaping () -> Void) -> TimerID {
        assertInLoop()
        // The next wait ends by the earliest deadline; one already due runs at the end of this
        // iteration, or ends the next wait at once.
        return timers.schedule(at: deadline, callback)
    }

    /// Cancels a timer; a no-op if it already ran.
    public func cancel(_ timer: TimerID) {
        assertInLoop()
        timers.cancel(timer)
    }

    /// Runs `task` on the loop thread soon; callable from any thread.
    public func execute(_ task: @escaping @Sendable () -> Void) {
        inbox.withLock { $0.append(task) }
        wakeup()
    }

    /// Runs `task` where a timer due now would run: after this batch's events, before its timers;
    /// asked while those run, at the next iteration, which then does not wait. A zero timeout
    /// without a timer heap insert and removal (libcurl asks for one per transfer). Loop thread only.
    public func runDue(_ task: @escaping () -> Void) {
        assertInLoop()
        dueNow.append(Task(run: task))
    }

    /// Runs `task` at the end of the current iteration, after all events were handled (loop thread only).
    public func afterEvents(_ task: @escaping () -> Void) {
        assertInLoop()
        afterIteration.append(Task(run: task))
    }

    /// Interrupts `epoll_wait`; callable from any thread.
    public func wakeup() {
        var one: UInt64 = 1
        _ = Glibc.write(wakeFD, &one, 8)
    }

    /// Makes `run` return after the current iteration (loop thread only).
    public func stop() { running = false }

    /// Runs `task` on the loop thread when `run` returns (buffers that must reach their file).
    public func whenStopped(_ task: @escaping () -> Void) { atStop.append(task) }

    /// Runs until `stop`.
    public func run() {
        owner.store(pthread_self(), ordering: .relaxed)
        while running { iterate(timeoutMilliseconds: -1) }
        for task in atStop { task() }
        atStop.removeAll()
        // Stopped: whoever joins the thread may tear down what was registered here.
        owner.store(0, ordering: .relaxed)
    }

    /// Runs one iteration on the calling thread, waiting at most `timeoutMilliseconds` (0: only
    /// what is ready now) — for in-process tests that drive a loop turn by turn, in the manner
    /// of swift-nio's `EmbeddedEventLoop`; the loop must not be running on another thread.
    public func runOnce(timeoutMilliseconds: CInt = 0) {
        precondition(owner.load(ordering: .relaxed) == 0, "\(name): runOnce while the loop runs on its thread")
        iterate(timeoutMilliseconds: timeoutMilliseconds)
    }

    /// One iteration: wait (at most `timeoutMilliseconds`, -1: no limit, and never past the
    /// earliest timer), dispatch the batch, run due timers, then the after-events tasks.
    @inline(__always)
    private func iterate(timeoutMilliseconds: CInt) {
        iterations &+= 1
        var timeout: Int64 = timeoutMilliseconds < 0 ? -1 : Int64(timeoutMilliseconds) * 1_000_000
        if !dueNow.isEmpty {
            timeout = 0
        } else if let next = timers.earliest() {
            let untilNext = max(0, next.nanoseconds - NanoTime.now().nanoseconds)
            timeout = timeout < 0 ? untilNext : min(timeout, untilNext)
        }
        let count: Int
        do {
            count = try selector.wait(timeoutNanoseconds: timeout)
        } catch {
            fatalError("\(name): \(error)")
        }
        // One clock read per batch: handlers see the time the batch arrived.
        now = NanoTime.now()
        eventsInBatch = count
        for i in 0..<count { dispatch(selector.event(at: i)) }
        batchesDispatched = iterations
        if !dueNow.isEmpty {
            swap(&dueNow, &runningDue)
            for i in runningDue.indices { runningDue[i].run() }
            runningDue.removeAll(keepingCapacity: true)
        }
        runTimers()
        while !afterIteration.isEmpty {
            swap(&afterIteration, &runningTasks)
            for i in runningTasks.indices { runningTasks[i].run() }
            runningTasks.removeAll(keepingCapacity: true)
        }
    }

    private func dispatch(_ event: SelectorEvent) {
        switch event.fd {
        case wakeFD:
            var value: UInt64 = 0
            _ = Glibc.read(wakeFD, &value, 8)
            let tasks = inbox.withLock { tasks in
                defer { tasks.removeAll() }
                return tasks
            }
            for task in tasks { task() }
        default:
            let index = Int(event.fd)
            guard index < registrations.count, registrations[index].generation == event.generation,
                let target = registrations[index].target
            else { return }
            target.ready(event.events)
        }
    }

    private func runTimers() {
        now = NanoTime.now()
        timers.popDue(at: now, into: &dueTimers)
        guard !dueTimers.isEmpty else { return }
        for id in dueTimers {
            if let callback = timers.take(id) { callback() }
        }
        dueTimers.removeAll(keepingCapacity: true)
    }

    private func slot(for fd: CInt) -> UInt32 {
        let index = Int(fd)
        if index >= registrations.count {
            registrations.append(
                contentsOf: repeatElement(
                    (generation: UInt32(0), target: nil as (any Selectable)?), count: index - registrations.count + 1))
        }
        nextGeneration &+= 1
        return nextGeneration
    }
}
