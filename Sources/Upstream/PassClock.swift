import Glibc

/// libcurl's reads of the monotonic clock during one pass of a loop's client, answered from the
/// pass's first read.
///
/// Why: libcurl 7.88 reads `CLOCK_MONOTONIC` (`Curl_now`) for every timer it sets, every state a
/// transfer enters and every progress update: about 35 reads per forwarded request, 28–38 of them
/// during passes (a `perf probe` on glibc's `clock_gettime` under wrk c=64, h2 upstream). Each is a
/// vDSO call, about 34 ns on this VM: 1.2 µs of a request's CPU (perf, `[vdso]`). Our own code reads
/// the clock once per loop turn (`EventLoop.now`), as nginx does.
///
/// How: the pass's first read of `CLOCK_MONOTONIC` is glibc's; each later one in the same pass is
/// the previous answer plus one nanosecond. So the clock still moves forward at every read, as
/// libcurl's timer loops need (a transfer that re-arms a run-now timer while `multi_socket` sweeps
/// its due timers must not be due again in the same sweep: its deadline is a read after the
/// sweep's), and it is never ahead of the real clock (each read takes longer than a nanosecond), so
/// the first read of the next pass, or any read outside a pass, is later than every answer given.
/// What a pass's reads lose is the time the pass itself takes (tens of microseconds; a timer set
/// in it fires that much early, and libcurl looks again then). Other clocks, and reads outside a
/// pass (other threads, start-up, the loop's own), are glibc's.
enum PassClock {
    typealias Read = @convention(c) (clockid_t, UnsafeMutablePointer<timespec>?) -> CInt

    /// glibc's `clock_gettime`: the next definition after the executable's (`RTLD_NEXT`).
    static let system: Read = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: -1), "clock_gettime") else {
            fatalError("dlsym(RTLD_NEXT, \"clock_gettime\") found nothing")
        }
        return unsafeBitCast(symbol, to: Read.self)
    }()

    @inline(__always)
    static func read(_ clock: clockid_t, _ time: UnsafeMutablePointer<timespec>?) -> CInt {
        if clock == CLOCK_MONOTONIC, let time,
           let answer = CurlPass.withCurrent({ $0.readClock(time) }) {
            return answer
        }
        return system(clock, time)
    }
}

/// `clock_gettime(2)` for the whole process (exported like `poll`): libcurl's reads of the
/// monotonic clock during a pass of a loop's client are answered from the pass's first
/// (`PassClock`); every other call is glibc's.
@_cdecl("clock_gettime")
public func clockReadingPasses(_ clock: clockid_t, _ time: UnsafeMutablePointer<timespec>?) -> CInt {
    PassClock.read(clock, time)
}
