import CCurlTuning
import EventLoop
import Glibc
import Upstream

/// One pass of libcurl on a loop's thread (a `curl_multi_socket_action`, an unpause), and what
/// the calls libcurl makes during it share: the sends it holds per socket (`SendBatch`), the
/// watched sockets found empty in this loop turn (`EmptySockets`) and the sockets holding bytes
/// read ahead of OpenSSL (`ReadAhead`). One per client: the client's `UpstreamTuning`, through
/// which it also tells what its loop knows of each socket (`QuietSockets`). While a pass runs,
/// the thread's is found through a thread-local word (`cc_current_pass`) by the executable's
/// `send`, `recv`, `poll` and `clock_gettime` (`SendBatch.send`, `QuietSockets`, `PassClock`).
public final class CurlPass: UpstreamTuning {
    var sends = SendBatch()
    var empty = EmptySockets()
    /// Sockets that hold bytes read ahead (some may have been read since), at most
    /// `ReadAhead.socketsPerPass`.
    var holding: [CInt] = []
    /// An empty block kept for the next read ahead.
    var spare: UnsafeMutableRawPointer?
    /// A socket holds bytes read ahead: if curl watches it for reading, curl reads it
    /// (`CURL_CSELECT_IN`), as if a wait had reported them, and the answer is true. The owning
    /// client's (`UpstreamTuning.init`).
    var rerun: (CInt) -> Bool
    /// The last pass left a watched socket holding bytes that its last run did not read: the
    /// loop's next turn must run it again (`stalledSockets`).
    public private(set) var stalled = false
    /// The last answer to a read of the monotonic clock in this pass (`PassClock`), and whether
    /// there was one.
    private var clock = timespec()
    private var clockRead = false
    /// The owning client's loop: the client holds it, and it outlives this.
    private let loop: Unretained<EventLoop>

    public required init(loop: EventLoop, rerun: @escaping (CInt) -> Bool) {
        self.loop = Unretained(loop)
        self.rerun = rerun
        holding.reserveCapacity(ReadAhead.socketsPerPass)
    }

    /// A pass with no client behind it (tests): no socket is run again.
    convenience init(loop: EventLoop) { self.init(loop: loop, rerun: { _ in false }) }

    deinit { free(spare) }

    /// The loop turn: a wait begun after a socket was found empty has reported it since.
    var turn: Int { loop.object.iterations }

    /// `run(_:)`, with every readiness check in `body` the kernel's when `strict`
    /// (`QuietSockets.asking(strictly:)`).
    @inline(__always)
    public func runLibcurl(strict: Bool, _ body: () -> Void) {
        run { QuietSockets.asking(strictly: strict, body) }
    }

    /// Runs `body` as a pass on this thread; a nested pass (an unpause from a callback, a run of
    /// a socket holding bytes) joins the outer one, which ends it. At its end, sockets curl
    /// watches that hold bytes read ahead are run again.
    @inline(__always)
    func run(_ body: () -> Void) {
        guard cc_current_pass() == nil else { return body() }
        cc_set_current_pass(Unmanaged.passUnretained(self).toOpaque())
        clockRead = false
        body()
        if !holding.isEmpty { runHolding() }
        cc_set_current_pass(nil)
        sends.passEnded()
    }

    public func holdsBytes(for fd: CInt) -> Bool { ReadAhead.block(of: fd) != nil }

    public func know(_ readiness: SocketReadiness, of fd: CInt) { QuietSockets.mark(fd, readiness) }

    public func opened(_ fd: CInt) {
        QuietSockets.mark(fd, .unknown)
        ReadAhead.release(fd)
    }

    public func closing(_ fd: CInt) {
        forget(fd)
        QuietSockets.mark(fd, .unknown)
    }

    /// Bytes held for a socket curl watches are bytes no wait will report: curl reads that socket
    /// again, round after round while a round reads some (each run may leave bytes on another
    /// socket, or on the same one). A socket left holding bytes (every transfer on it waits for
    /// something else first: libcurl 7.88's h2 reads nothing for the others while one stream's
    /// data is undelivered) leaves the pass `stalled`. Sockets curl does not watch for reading
    /// (parked, a paused transfer's) are left as they are; emptied ones leave the list.
    private func runHolding() {
        for _ in 0..<64 {
            var progressed = false
            stalled = false
            var i = 0
            while i < holding.count {
                let fd = holding[i]
                let before = ReadAhead.count(fd)
                if before == 0 {
                    holding.swapAt(i, holding.count - 1)
                    holding.removeLast()
                    continue
                }
                i += 1
                guard rerun(fd) else { continue }
                let after = ReadAhead.count(fd)
                if after < before { progressed = true }
                if after > 0 { stalled = true }
            }
            if !progressed { return }
        }
    }

    /// A read of the monotonic clock in this pass: glibc's for the first and the first after
    /// body bytes moved (`bodyMoved`), the last answer plus a nanosecond for each other (`PassClock`).
    @inline(__always)
    func readClock(_ time: UnsafeMutablePointer<timespec>) -> CInt {
        if clockRead {
            clock = Self.nanosecond(after: clock)
            time.pointee = clock
            return 0
        }
        let answer = cc_glibc_clock_gettime(CLOCK_MONOTONIC, time)
        if answer == 0 {
            clock = time.pointee
            clockRead = true
        }
        return answer
    }

    /// libcurl handed over or asked for body bytes (a write or read callback): its next read of
    /// the clock is glibc's, so a deadline it sets after moving them is later than a sweep's `now`
    /// read before (`PassClock`).
    @inline(__always)
    public func bodyMoved() { clockRead = false }

    @inline(__always)
    static func nanosecond(after time: timespec) -> timespec {
        time.tv_nsec < 999_999_999
            ? timespec(tv_sec: time.tv_sec, tv_nsec: time.tv_nsec + 1)
            : timespec(tv_sec: time.tv_sec + 1, tv_nsec: 0)
    }

    /// The sockets that may hold bytes, for the loop's next turn to run those that still do and
    /// that curl watches (each run may change the others).
    public func stalledSockets() -> [CInt] {
        stalled = false
        return holding
    }

    /// curl closes `fd`: nothing known of it holds for a socket that takes its number, and what
    /// it held unread is dropped.
    func forget(_ fd: CInt) {
        sends.forget(fd)
        empty.forget(fd)
        ReadAhead.release(fd)
        if let i = holding.firstIndex(of: fd) { holding.remove(at: i) }
    }

    /// `body` with the thread's pass, or nil outside one.
    @inline(__always)
    static func withCurrent<R>(_ body: (CurlPass) -> R) -> R? {
        guard let pass = cc_current_pass() else { return nil }
        return Unmanaged<CurlPass>.fromOpaque(pass)._withUnsafeGuaranteedRef(body)
    }
}

/// Sockets curl watches for reading that were found empty in this loop turn: a `recv` that would
/// block, or a zero-timeout `poll` that found nothing to read (`QuietSockets`, `Mark.watched`).
///
/// Such a socket is registered with the loop for reading, level-triggered, so whatever comes on it
/// after it was found empty is reported by the loop's next wait, and curl reads it then. Until that
/// wait, libcurl's later checks of it in the same turn get the answer it already had ("would
/// block", "nothing ready") with no system call: the kernel's answer of a moment before, as if the
/// bytes had come a moment later. Over h2 each transfer that runs reads the shared connection until
/// it would block (libcurl 7.88's `data_pending` is always true for h2), and each that runs after
/// the first polls it: several system calls per request at high concurrency (bench/proxy.sh).
struct EmptySockets {
    private var sockets: [CInt] = []
    private var turn = -1

    init() { sockets.reserveCapacity(4) }

    @inline(__always)
    func contains(_ fd: CInt, turn: Int) -> Bool {
        turn == self.turn && sockets.contains(fd)
    }

    /// `fd` had nothing to read in loop turn `turn`.
    mutating func note(_ fd: CInt, turn: Int) {
        if turn != self.turn {
            sockets.removeAll(keepingCapacity: true)
            self.turn = turn
        }
        if !sockets.contains(fd) { sockets.append(fd) }
    }

    mutating func forget(_ fd: CInt) {
        sockets.removeAll { $0 == fd }
    }
}
