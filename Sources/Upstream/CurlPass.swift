import EventLoop
import Glibc

/// One pass of libcurl on a loop's thread (a `curl_multi_socket_action`, an unpause), and what
/// the calls libcurl makes during it share: the sends it holds per socket (`SendBatch`) and the
/// watched sockets found empty in this loop turn (`EmptySockets`). One per client; while a pass
/// runs, the thread's is found through a thread-specific key by the executable's `send`, `recv`
/// and `poll` (`SendBatch.send`, `QuietSockets`).
final class CurlPass {
    var sends = SendBatch()
    var empty = EmptySockets()
    private unowned(unsafe) let loop: EventLoop

    /// `loop` is the owning client's, which holds it: it outlives this.
    init(loop: EventLoop) { self.loop = loop }

    /// The loop turn: a wait begun after a socket was found empty has reported it since.
    var turn: Int { loop.iterations }

    /// Runs `body` as a pass on this thread; a nested pass (an unpause from a callback) joins the
    /// outer one, which ends it.
    @inline(__always)
    func run(_ body: () -> Void) {
        guard pthread_getspecific(Self.key) == nil else { return body() }
        pthread_setspecific(Self.key, Unmanaged.passUnretained(self).toOpaque())
        body()
        pthread_setspecific(Self.key, nil)
        sends.passEnded()
    }

    /// curl closes `fd`: nothing known of it holds for a socket that takes its number.
    func forget(_ fd: CInt) {
        sends.forget(fd)
        empty.forget(fd)
    }

    /// `body` with the thread's pass, or nil outside one.
    @inline(__always)
    static func withCurrent<R>(_ body: (CurlPass) -> R) -> R? {
        guard let pass = pthread_getspecific(key) else { return nil }
        return Unmanaged<CurlPass>.fromOpaque(pass)._withUnsafeGuaranteedRef(body)
    }

    /// The thread's pass while one runs (unretained: the client that owns it outlives its passes).
    static let key: pthread_key_t = {
        var key = pthread_key_t()
        precondition(pthread_key_create(&key, nil) == 0, "pthread_key_create")
        return key
    }()
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
/// the first polls it: at c=64 that was 2.1 `recvfrom` and 1.1 `poll` per request.
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
