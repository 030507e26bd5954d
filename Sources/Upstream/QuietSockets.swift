import CCurl
import Glibc

/// The upstream sockets whose readiness the event loop already knows, so that libcurl's
/// zero-timeout readiness checks of them need no system call.
///
/// libcurl 7.88 asks the kernel about a pooled connection twice per request, each a `poll(2)`
/// with a zero timeout: before reusing it (`extract_if_dead`: did the server close it while it
/// was idle?) and right after sending the request (`Curl_readwrite`: has the response come
/// already?). Each costs about 0.7 µs of a forwarded request's CPU at full load (measured: both
/// answered here, 1.5 µs less per request and 4 % more requests a second). Both come while the
/// connection is parked, as the loop sees it: curl says which sockets it watches only after its
/// state machine ran, so between transfers until the request was sent. And for a parked socket
/// the loop knows both answers. It stays in the epoll set, level-triggered, registered for
/// reading; when it turns readable (an EOF, stray bytes) it is taken out and reported dead
/// (`CurlSocket.ready`). So nothing came on it as of the loop's last `epoll_wait`:
/// - before reuse, "alive", which is how nginx and HAProxy judge the connections they keep (one
///   is reused unless its idle watch fired);
/// - after the send, "nothing yet", true a moment late: libcurl then watches the socket through
///   its socket callback, and the registration reports at once whatever came meanwhile.
///
/// Nothing else is answered. A connecting socket is asked whether the connect completed, at each
/// event, so "not yet" would never end; it is not marked until it carried a transfer. While curl
/// watches a socket it reads on as long as the kernel says data is pending, and that check stays
/// the kernel's (answered "nothing", a response cut short after its head reached the client
/// before the cut was seen, where it was a clean 502). A socket closed without the closing
/// callback never connected, so never had a mark that could outlive it.
///
/// What the answer changes: a server's close that lands between the loop's last `epoll_wait`
/// and the reuse (up to a loop turn, instead of the microseconds between libcurl's poll and its
/// send) is found by the send instead, and libcurl retries the request on a new connection as it
/// does when that race happens anyway (`Curl_retry_request`); a request body that was sent cannot
/// be sent again, so such a request is answered 502, as nginx answers one it does not retry.
public enum QuietSockets {
    /// One byte per descriptor number below `capacity`, 1 while the socket's readiness is known.
    /// `calloc`'d: pages no descriptor number reaches are never touched (descriptors are small).
    static let capacity = 1 << 20
    nonisolated(unsafe) static let marks: UnsafeMutablePointer<UInt8> =
        calloc(capacity, 1)!.assumingMemoryBound(to: UInt8.self)

    /// Records whether `fd`'s readiness is known to its loop (see the type's comment for when).
    static func mark(_ fd: CInt, known: Bool) {
        guard fd >= 0 && Int(fd) < capacity else { return }
        cc_store_byte(marks + Int(fd), known ? 1 : 0)
    }

    static func isKnown(_ fd: CInt) -> Bool {
        fd >= 0 && Int(fd) < capacity && cc_load_byte(marks + Int(fd)) == 1
    }

    /// Answers a `poll` call without the kernel when it is a zero-timeout check of known sockets
    /// only (libcurl passes one entry, or two naming one socket for reading and writing):
    /// nothing ready, every `revents` cleared. False: the kernel must answer it.
    @inline(__always)
    static func answer(_ fds: UnsafeMutablePointer<pollfd>?, _ count: nfds_t, _ timeout: CInt) -> Bool {
        guard timeout == 0, count > 0, count <= 2, let fds else { return false }
        for i in 0..<Int(count) where !isKnown(fds[i].fd) { return false }
        for i in 0..<Int(count) { fds[i].revents = 0 }
        return true
    }
}

/// `poll(3)` for the whole process (the executable exports it, so libcurl's calls bind here):
/// zero-timeout checks of sockets whose readiness the loop knows are answered from that
/// (`QuietSockets`); every other call is glibc's.
@_cdecl("poll")
public func pollAnsweringKnownSockets(_ fds: UnsafeMutablePointer<pollfd>?, _ count: nfds_t, _ timeout: CInt) -> CInt {
    if QuietSockets.answer(fds, count, timeout) { return 0 }
    return cc_kernel_poll(fds, count, timeout)
}
