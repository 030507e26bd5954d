import CCurlTuning
import Glibc
import Upstream

/// The upstream sockets whose readiness the event loop already knows, so that libcurl's
/// zero-timeout readiness checks of them need no system call.
///
/// libcurl 7.88 asks the kernel about a pooled plain-HTTP connection twice per request, each a
/// `poll(2)` with a zero timeout: before reusing it (`extract_if_dead`: did the server close it
/// while it was idle?) and right after sending a bodiless request (`Curl_readwrite`: has the
/// response come already?): two system calls per forwarded request (bench/cost-profile.sh counts
/// what answering them saves, bench/proxy.sh what that is worth). Both come
/// while the connection is parked, as the loop sees it: curl says which sockets it watches only
/// after its state machine ran, so between transfers until the request was sent. A parked
/// socket stays in the epoll set, level-triggered, registered for reading; when it turns
/// readable (an EOF, stray bytes) it is taken out and reported dead (`CurlSocket.ready`). Once a
/// wait begun after the parking has been dispatched (`ParkedSockets`), nothing came on it as of
/// that wait, and that answers both:
/// - before reuse, "alive", which is how nginx and HAProxy judge the connections they keep (one
///   is reused unless its idle watch fired);
/// - after the send, "nothing yet", true a moment late: libcurl then watches the socket through
///   its socket callback, and the registration reports at once whatever came meanwhile.
///
/// Until that wait, the kernel answers (a connection parked and reused within one loop turn: an
/// EOF that came with the last response is in the kernel but no wait has seen it), and its
/// "nothing" stands in for the wait: one poll per such reuse instead of two.
///
/// A connected socket curl watches for reading (an h2 connection with streams in flight) is
/// registered for reading too: once the kernel found it empty in a loop turn (a check, or a read
/// that would block), later checks and reads in that turn get the same answer without it, and
/// what came meanwhile is the next wait's to report (`Mark.watched`, `EmptySockets`).
///
/// Nothing else is answered:
/// - a connecting socket (asked whether the connect completed, at each event: "not yet" would
///   never end); it is not marked until it carried a transfer;
/// - a check for writing (a request body to send): "not yet" would cost a loop turn and two
///   `epoll_ctl`, more than the poll.
///
/// A TLS HTTP/1.1 connection's liveness check is a one-byte `recv(MSG_PEEK)` (libcurl's OpenSSL
/// backend), not a `poll`: the executable defines `recv` too, and a one-byte peek at a marked
/// socket is answered the same way (`receive`).
///
/// A parked connection that turns readable (reported by a wait, or by the kernel at the check
/// after its parking) is spoiled: whatever came, EOF or bytes no request asked for, every check
/// for reading answers an error, so libcurl drops it.
/// A socket closed without the closing callback never connected, so never had a mark that
/// could outlive it.
///
/// What the answer changes: a server's close that lands after the wait that made the connection
/// quiet and before the reuse (up to a loop turn, instead of the microseconds between libcurl's
/// poll and its send) is found by the send instead, and libcurl sends the request again on a new
/// connection, as it does when that race happens anyway (`Curl_retry_request`). It cannot send a
/// request body again, so while a request with a body may be choosing a connection, every check
/// is the kernel's (`asking(strictly:)`): such a request meets only the race it always met.
public enum QuietSockets {
    /// What is known of a socket's readiness, one byte per descriptor number (the client's
    /// `CurlSocket.readiness`), and what a check for reading gets:
    /// - `unknown`: every check is the kernel's;
    /// - `quiet`: parked, and nothing came on it as of a wait (or a check) since: "nothing ready";
    /// - `parked`: parked, connected, registered for reading, not yet through a wait: the kernel
    ///   answers, and its "nothing ready" makes it quiet (an EOF that came after it is the next
    ///   wait's to report), so a connection parked and reused in one loop turn costs one poll
    ///   (before the reuse), not two;
    /// - `spoiled`: parked and turned readable (an EOF, or bytes no request asked for): an error,
    ///   so libcurl drops the connection (libcurl 7.88 counts pending bytes as alive and would
    ///   read them as the next request's response, which may be another client's);
    /// - `watched`: connected, and curl watches it for reading (level-triggered in the loop): once
    ///   found empty in a loop turn, a check for reading or a read gets that answer again until
    ///   the turn's end, with no system call (`EmptySockets`).
    typealias Mark = SocketReadiness

    /// `calloc`'d: pages no descriptor number reaches are never touched (descriptors are small).
    static let capacity = 1 << 20
    nonisolated(unsafe) static let marks: UnsafeMutablePointer<UInt8> =
        calloc(capacity, 1)!.assumingMemoryBound(to: UInt8.self)

    /// Records what the loop knows of `fd`'s readiness (see the type's comment for when).
    static func mark(_ fd: CInt, _ mark: Mark) {
        guard fd >= 0 && Int(fd) < capacity else { return }
        cc_store_byte(marks + Int(fd), mark.rawValue)
    }

    static func mark(of fd: CInt) -> Mark {
        guard fd >= 0 && Int(fd) < capacity else { return .unknown }
        return Mark(rawValue: cc_load_byte(marks + Int(fd))) ?? .unknown
    }

    /// `poll`: a zero-timeout check for reading of one marked socket is answered from its mark
    /// (quiet: nothing ready, no system call) or by the kernel, whose "nothing" is remembered
    /// (parked); everything else is the kernel's.
    @inline(__always)
    static func poll(_ fds: UnsafeMutablePointer<pollfd>?, _ count: nfds_t, _ timeout: CInt) -> CInt {
        guard timeout == 0, count == 1, let fds, fds[0].events & ~readEvents == 0 else {
            return pollHolding(fds, count) ?? cc_kernel_poll(fds, count, timeout)
        }
        let fd = fds[0].fd
        if ReadAhead.block(of: fd) != nil { return holding(fds) }
        switch mark(of: fd) {
        case .quiet:
            if cc_strict_checks() != 0 { return cc_kernel_poll(fds, 1, 0) }
            fds[0].revents = 0
            return 0
        case .parked:
            // The first check after the parking: libcurl's, before it reuses the connection.
            let ready = cc_kernel_poll(fds, 1, 0)
            if ready == 0 {
                mark(fd, .quiet)
            } else if fds[0].revents & readEvents != 0 {
                mark(fd, .spoiled)
                fds[0].revents = spoiledEvents
            }
            return ready
        case .spoiled:
            fds[0].revents = spoiledEvents
            return 1
        case .watched:
            return CurlPass.withCurrent { pass in
                if pass.empty.contains(fd, turn: pass.turn) {
                    fds[0].revents = 0
                    return 0
                }
                let ready = cc_kernel_poll(fds, 1, 0)
                if ready == 0 { pass.empty.note(fd, turn: pass.turn) }
                return ready
            } ?? cc_kernel_poll(fds, 1, 0)
        case .unknown:
            return cc_kernel_poll(fds, 1, 0)
        }
    }

    /// A check for reading of a socket that holds bytes read ahead (`ReadAhead`): readable, as
    /// if they were in the kernel; a parked one is spoiled, as one the kernel found readable is.
    private static func holding(_ fds: UnsafeMutablePointer<pollfd>) -> CInt {
        switch mark(of: fds[0].fd) {
        case .parked, .quiet, .spoiled:
            mark(fds[0].fd, .spoiled)
            fds[0].revents = spoiledEvents
        case .watched, .unknown:
            fds[0].revents = fds[0].events & heldEvents
        }
        return 1
    }

    /// Any other call (several sockets, a wait, a check for writing) in which a socket asked about
    /// for reading holds bytes read ahead: the kernel answers without waiting, and those sockets
    /// are readable too. Nil when none holds any.
    private static func pollHolding(_ fds: UnsafeMutablePointer<pollfd>?, _ count: nfds_t) -> CInt? {
        guard let fds else { return nil }
        let entries = UnsafeMutableBufferPointer(start: fds, count: Int(count))
        func holds(_ entry: pollfd) -> Bool { entry.events & heldEvents != 0 && ReadAhead.block(of: entry.fd) != nil }
        guard entries.contains(where: holds) else { return nil }
        let ready = cc_kernel_poll(fds, count, 0)
        guard ready >= 0 else { return ready }
        var result: CInt = 0
        for i in entries.indices {
            if holds(entries[i]) { entries[i].revents |= entries[i].events & heldEvents }
            if entries[i].revents != 0 { result += 1 }
        }
        return result
    }

    /// What a socket holding bytes read ahead reports to a check for reading.
    static let heldEvents = Int16(POLLIN | POLLRDNORM)

    /// `recv`: libcurl's OpenSSL backend checks a pooled TLS connection by peeking one byte
    /// (`ossl_check_cxn`): an EOF or an error is dead, a byte or "would block" alive. A one-byte
    /// peek at a marked socket is answered as `poll` answers a check for reading: quiet, "would
    /// block" (no system call); parked, the kernel's answer, whose "would block" makes it quiet
    /// and whose EOF or byte spoils it; spoiled, an EOF, so libcurl drops the connection where it
    /// would have called the stray bytes alive. Every other call is glibc's `recvfrom`.
    @inline(__always)
    static func receive(_ fd: CInt, _ buffer: UnsafeMutableRawPointer?, _ length: Int, _ flags: CInt) -> Int {
        if let block = ReadAhead.block(of: fd) { return receiveHolding(fd, block, buffer, length, flags) }
        guard flags == peekFlag, length == 1 else {
            if flags == 0, case .watched = mark(of: fd) { return receiveWatched(fd, buffer, length) }
            return recvfrom(fd, buffer, length, flags, nil, nil)
        }
        switch mark(of: fd) {
        case .quiet:
            if cc_strict_checks() != 0 { return recvfrom(fd, buffer, 1, flags, nil, nil) }
            errno = EAGAIN
            return -1
        case .parked:
            let got = recvfrom(fd, buffer, 1, flags, nil, nil)
            if got >= 0 {
                mark(fd, .spoiled)
                return 0
            }
            if errno == EAGAIN { mark(fd, .quiet) }
            return got
        case .spoiled:
            return 0
        case .unknown, .watched:
            return recvfrom(fd, buffer, 1, flags, nil, nil)
        }
    }

    /// A read of a socket that holds bytes read ahead is answered from them, in order (a peek
    /// leaves them there); a one-byte peek at a parked one, libcurl's liveness check, finds it
    /// spoiled (an EOF), as it would bytes in the kernel.
    private static func receiveHolding(
        _ fd: CInt, _ block: UnsafeMutableRawPointer, _ buffer: UnsafeMutableRawPointer?,
        _ length: Int, _ flags: CInt
    ) -> Int {
        if flags == peekFlag && length == 1 {
            switch mark(of: fd) {
            case .parked, .quiet, .spoiled:
                mark(fd, .spoiled)
                return 0
            case .watched, .unknown:
                break
            }
        }
        return ReadAhead.take(from: block, of: fd, into: buffer, length, peek: flags & peekFlag != 0)
    }

    /// A read of a socket curl watches: "would block" without the kernel if it was found empty in
    /// this loop turn; the kernel's answer otherwise, and its "would block" is remembered. A short
    /// read (a TLS record's header) reads ahead what the socket holds (`ReadAhead`).
    private static func receiveWatched(_ fd: CInt, _ buffer: UnsafeMutableRawPointer?, _ length: Int) -> Int {
        return CurlPass.withCurrent { pass in
            if pass.empty.contains(fd, turn: pass.turn) {
                errno = EAGAIN
                return -1
            }
            let got =
                length <= ReadAhead.shortRead
                ? ReadAhead.read(fd, into: buffer, length, pass: pass) ?? recvfrom(fd, buffer, length, 0, nil, nil)
                : recvfrom(fd, buffer, length, 0, nil, nil)
            if got < 0 && errno == EAGAIN {
                pass.empty.note(fd, turn: pass.turn)
                errno = EAGAIN
            }
            return got
        } ?? recvfrom(fd, buffer, length, 0, nil, nil)
    }

    static let peekFlag = CInt(MSG_PEEK)

    /// Runs `body` with this thread's checks all the kernel's when `strict` (a thread-local word,
    /// `cc_strict_checks`): while libcurl may be choosing a pooled connection for a request with a
    /// body (`UpstreamClient.socketAction`). A connection taken for alive that the server closed
    /// after the wait is found by the send; libcurl sends a bodiless request again on a new
    /// connection, but a body that went out cannot be sent again, so for such a request the
    /// kernel is asked, as before (one poll).
    @inline(__always)
    static func asking(strictly strict: Bool, _ body: () -> Void) {
        guard strict else { return body() }
        let outer = cc_strict_checks()
        cc_set_strict_checks(1)
        body()
        cc_set_strict_checks(outer)
    }

    /// A spoiled socket's answer: libcurl's `Curl_socket_check` takes `POLLNVAL` (or `POLLPRI`)
    /// for its error bit, which its liveness check calls dead; `POLLERR` alone it takes for
    /// readable, and then peeks a byte, which counts as alive.
    static let spoiledEvents = Int16(POLLERR | POLLNVAL)

    /// What libcurl asks about a socket it wants to read (`Curl_socket_check`, one entry). A check
    /// for writing (a request body to send) is the kernel's: "not yet" would cost a loop turn and
    /// two `epoll_ctl` to watch for writing and back, more than the poll.
    static let readEvents = Int16(POLLIN | POLLPRI | POLLRDNORM | POLLRDBAND)
}
