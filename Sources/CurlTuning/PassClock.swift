import CCurlTuning
import Glibc

/// libcurl's reads of the monotonic clock during one pass of a loop's client, most of them
/// answered from the pass's last real read.
///
/// Why: libcurl 7.88 reads `CLOCK_MONOTONIC` (`Curl_now`) for every timer it sets, every state a
/// transfer enters and every progress update: dozens of reads per forwarded request, nearly all of
/// them during passes, each a vDSO call (a `perf probe` on glibc's `clock_gettime` under
/// bench/proxy.sh counts them). Our own code reads the clock once per loop turn (`EventLoop.now`),
/// as nginx does.
///
/// How: the pass's first read of `CLOCK_MONOTONIC` is glibc's, and so is the first after libcurl
/// moved body bytes (a write or read callback, `CurlPass.bodyMoved`); each other read is the
/// previous answer plus one nanosecond. So the clock never stands still and is never ahead of the
/// real one (each read takes longer than a nanosecond): the next real read is later than every
/// answer given. libcurl keeps microseconds (`Curl_now` drops the rest), so within a pass many
/// reads give it the same time, and a timer it sets is due in the sweep of due timers that
/// set it (`multi_socket` compares with a `now` read before the sweep; an equal key is due). That
/// sweep still ends: each new deadline costs a read, so a key can equal `now` for at most about a
/// thousand reads. But it would let a transfer that stopped to give the others a turn (libcurl
/// reads a connection at most 100 times in a row, then sets a run-now timer for the rest) run again
/// in the same sweep; the real read after its body bytes puts that timer after the sweep's `now`,
/// in the next loop turn, as without this. What a pass's other reads lose is the time the pass
/// takes between body bytes (microseconds; a timer set then fires that much early, and libcurl
/// looks again). Other clocks, and reads outside a pass (other threads, start-up, the loop's own),
/// are glibc's (`cc_glibc_clock_gettime`: the next definition after the executable's).
enum PassClock {
    @inline(__always)
    static func read(_ clock: clockid_t, _ time: UnsafeMutablePointer<timespec>?) -> CInt {
        if clock == CLOCK_MONOTONIC, let time,
            let answer = CurlPass.withCurrent({ $0.readClock(time) })
        {
            return answer
        }
        return cc_glibc_clock_gettime(clock, time)
    }
}
