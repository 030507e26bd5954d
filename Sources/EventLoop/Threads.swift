import Glibc

/// Thread primitives shared by the loops and the blocking workers (token store, analytics store).
public enum Threads {
    /// Starts a pthread running `body`.
    public static func spawn(_ body: @escaping () -> Void) throws(IOError) -> pthread_t {
        var thread = pthread_t()
        let box = Unmanaged.passRetained(ThreadBody(body)).toOpaque()
        let result = pthread_create(
            &thread, nil,
            { arg in
                Unmanaged<ThreadBody>.fromOpaque(arg!).takeRetainedValue().run()
                return nil
            }, box)
        guard result == 0 else {
            Unmanaged<ThreadBody>.fromOpaque(box).release()
            throw IOError(errnoCode: result, call: "pthread_create")
        }
        return thread
    }

    /// The closure a new pthread runs, boxed to cross `pthread_create`'s void pointer.
    private final class ThreadBody: @unchecked Sendable {
        let run: () -> Void
        init(_ run: @escaping () -> Void) { self.run = run }
    }
}

/// A POSIX counting semaphore at a stable address, as `sem_t` requires.
public final class PosixSemaphore: @unchecked Sendable {
    // sem_post and sem_wait are thread-safe by contract, and the pointer never changes.
    private let sem = UnsafeMutablePointer<sem_t>.allocate(capacity: 1)

    /// A semaphore at zero.
    public init() { sem_init(sem, 0, 0) }

    deinit {
        sem_destroy(sem)
        sem.deallocate()
    }

    /// Adds one.
    public func post() { sem_post(sem) }

    /// Waits for one (retrying interrupted waits).
    public func wait() {
        while sem_wait(sem) == -1 && errno == EINTR {}
    }
}
