import CLinux
import Glibc
import Synchronization

/// Readiness interest for a descriptor.
public struct Interest: OptionSet, Sendable, Hashable {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }
    /// Readable.
    public static let read = Interest(rawValue: EPOLLIN.rawValue | EPOLLRDHUP.rawValue)
    /// Writable.
    public static let write = Interest(rawValue: EPOLLOUT.rawValue)
}

/// One readiness event: the descriptor, the registration generation packed with it into
/// `epoll_data.u64`, and the epoll bits.
struct SelectorEvent {
    var fd: CInt
    var generation: UInt32
    var events: UInt32
}

/// The narrow epoll wrapper (swift-nio `SelectorEpoll.swift`): register, reregister, deregister, wait, close.
/// The registration generation is packed with the fd into `epoll_data.u64` so events for a
/// descriptor number that was closed and reused can be recognised and dropped.
final class Selector {
    let epfd: CInt
    private var events: UnsafeMutablePointer<epoll_event>
    private let capacity = 512

    init() throws(IOError) {
        epfd = try syscall(where: "epoll_create1") { cl_epoll_create() }
        events = .allocate(capacity: capacity)
    }

    deinit {
        events.deallocate()
        closeDescriptor(epfd)
    }

    func register(fd: CInt, generation: UInt32, interest: Interest, exclusive: Bool = false) throws(IOError) {
        // EPOLLEXCLUSIVE allows only EPOLLIN/EPOLLOUT with it (EPOLLRDHUP is EINVAL); a listener needs no more.
        let flags =
            exclusive
            ? (interest.rawValue & (EPOLLIN.rawValue | EPOLLOUT.rawValue)) | EPOLLEXCLUSIVE.rawValue : interest.rawValue
        _ = try syscall(where: "epoll_ctl(ADD)") {
            cl_epoll_ctl(epfd, EPOLL_CTL_ADD, fd, flags, Self.pack(fd, generation))
        }
    }

    func reregister(fd: CInt, generation: UInt32, interest: Interest) throws(IOError) {
        _ = try syscall(where: "epoll_ctl(MOD)") {
            cl_epoll_ctl(epfd, EPOLL_CTL_MOD, fd, interest.rawValue, Self.pack(fd, generation))
        }
    }

    func deregister(fd: CInt) {
        // Closing the descriptor removes it too; an ENOENT here is harmless.
        _ = cl_epoll_ctl(epfd, EPOLL_CTL_DEL, fd, 0, 0)
    }

    /// Whether `epoll_pwait2` works here; cleared on the first ENOSYS or EPERM (an old kernel, or
    /// a seccomp profile that does not know the call), after which `epoll_wait` takes over.
    static let precise = Atomic<Bool>(true)

    /// Waits up to `timeoutNanoseconds` (negative: forever); returns how many events `event(at:)`
    /// can read. With `epoll_wait` the timeout is rounded up to whole milliseconds, so a timer
    /// never fires early.
    func wait(timeoutNanoseconds: Int64) throws(IOError) -> Int {
        if Self.precise.load(ordering: .relaxed) {
            let count = cl_epoll_pwait2(epfd, events, CInt(capacity), timeoutNanoseconds)
            if count >= 0 { return Int(count) }
            switch cl_errno() {
            case EINTR: return 0
            case ENOSYS, EPERM: Self.precise.store(false, ordering: .relaxed)
            default: break
            }
        }
        let milliseconds = timeoutNanoseconds < 0 ? -1 : CInt(clamping: (timeoutNanoseconds + 999_999) / 1_000_000)
        let count = cl_epoll_wait(epfd, events, CInt(capacity), milliseconds)
        if count >= 0 { return Int(count) }
        // Interrupted (a signal, SIGSTOP/SIGCONT, a debugger attaching): return, and the loop
        // waits again for what is left. Retrying with the same timeout would start it over, and a
        // timer could wait as long as the interruptions keep coming.
        if cl_errno() == EINTR { return 0 }
        // Any other failure is reported as `syscall` reports it (errno is still the call's).
        return Int(try syscall(where: "epoll_wait") { count })
    }

    /// Event `i` of the last `wait`.
    func event(at i: Int) -> SelectorEvent {
        let data = cl_epoll_event_data(events + i)
        return SelectorEvent(
            fd: CInt(truncatingIfNeeded: data & 0xFFFF_FFFF), generation: UInt32(data >> 32),
            events: cl_epoll_event_events(events + i))
    }

    private static func pack(_ fd: CInt, _ generation: UInt32) -> UInt64 {
        UInt64(generation) << 32 | UInt64(UInt32(bitPattern: fd))
    }
}

/// Reading the event bits `Selectable.ready` receives.
public enum ReadyEvents {
    /// Data, end of stream or hang-up: a read will not block.
    public static func isReadable(_ events: UInt32) -> Bool {
        events & (EPOLLIN.rawValue | EPOLLRDHUP.rawValue | EPOLLHUP.rawValue) != 0
    }
    /// A write will not block.
    public static func isWritable(_ events: UInt32) -> Bool { events & EPOLLOUT.rawValue != 0 }
    /// The socket has an error pending.
    public static func isError(_ events: UInt32) -> Bool { events & EPOLLERR.rawValue != 0 }
}
