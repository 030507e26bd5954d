import CCurlTuning
import Glibc

/// libcurl's sends on one loop thread during one pass of libcurl (a `curl_multi_socket_action`, an
/// unpause), coalesced per socket: the first send to a socket in a pass goes out at once, and the
/// later ones to it (`MSG_MORE`) leave together when the pass ends (`TCP_CORK` cleared, which
/// pushes what the socket holds and sets nothing). A socket that had more than one send in its
/// last pass (a busy h2 connection) holds its first send too; a pass that sends it one makes it
/// ordinary again.
///
/// Why: over a multiplexed h2 connection every new request is a send of its own (a HEADERS frame
/// in a TLS record: libcurl 7.88 writes each stream's frames as it runs that stream), and on
/// loopback each send is a segment the kernel carries to the upstream there and then. A loop pass
/// that starts twelve requests on one connection sent twelve segments; now it sends one
/// (bench/proxy.sh against an h2 upstream measures the CPU per request it saves). A plain HTTP/1.1
/// connection carries one request at a time, one send per pass: nothing is held, nothing pushed.
///
/// Nothing waits longer than the pass: the pass runs on to its end within one loop turn, and
/// libcurl never waits in it (the multi interface does not block). A socket that libcurl closes in
/// the pass is pushed before the close and forgotten (`forget`), so its number, if reused, is not
/// pushed at the pass's end; a push of a socket that holds nothing costs one `setsockopt` and
/// changes nothing.
/// Unpushed, the kernel would send held bytes when an acknowledgement came or after 200 ms.
struct SendBatch {
    /// Sockets sent to in this pass, how often, and whether anything was held; a pass touches a handful.
    private var sockets: [(fd: CInt, sends: Int, held: Bool)] = []
    /// Sockets that had more than one send in the last pass that sent to them: their first send
    /// in a pass is held too.
    private var busy: [CInt] = []

    init() { sockets.reserveCapacity(8) }

    /// The flags for one more send to `fd` in this pass: `MSG_MORE` after the first (and for the
    /// first to a busy socket).
    @inline(__always)
    mutating func flags(sendingTo fd: CInt, _ flags: CInt) -> CInt {
        for i in sockets.indices where sockets[i].fd == fd {
            sockets[i].sends += 1
            sockets[i].held = true
            return flags | Self.more
        }
        let held = busy.contains(fd)
        sockets.append((fd, 1, held))
        return held ? flags | Self.more : flags
    }

    /// curl closes `fd`: what it holds is pushed first (a close with unread bytes in the socket is
    /// a reset, which would drop it: a GOAWAY, a TLS close_notify), and its number starts afresh.
    mutating func forget(_ fd: CInt) {
        if let i = sockets.firstIndex(where: { $0.fd == fd }) {
            if sockets[i].held { cc_push_held(fd) }
            sockets.remove(at: i)
        }
        busy.removeAll { $0 == fd }
    }

    /// The pass ended: every socket that holds bytes sends them.
    @inline(__always)
    mutating func passEnded() {
        if !sockets.isEmpty { pushHeld() }
    }

    private mutating func pushHeld() {
        for socket in sockets {
            if socket.held { cc_push_held(socket.fd) }
            if socket.sends > 1 {
                if !busy.contains(socket.fd) { busy.append(socket.fd) }
            } else if let i = busy.firstIndex(of: socket.fd) {
                busy.remove(at: i)
            }
        }
        sockets.removeAll(keepingCapacity: true)
    }

    static let more = CInt(MSG_MORE)

    /// `send`: into the thread's pass during one, else straight to the kernel.
    @inline(__always)
    static func send(_ fd: CInt, _ buffer: UnsafeRawPointer?, _ length: Int, _ flags: CInt) -> Int {
        guard let flags = CurlPass.withCurrent({ $0.sends.flags(sendingTo: fd, flags) }) else {
            return sendto(fd, buffer, length, flags, nil, 0)
        }
        let sent = sendto(fd, buffer, length, flags, nil, 0)
        if sent < 0 && answeredBeforeReset(fd) { return length }
        return sent
    }

    /// A send of libcurl's failed: whether the upstream answered and then reset the connection,
    /// its answer still unread. An upstream that answers early (a 401, a 413, a 200) and closes
    /// without reading the request body resets the connection, and the next send fails; libcurl
    /// 7.88 then ends the transfer with "Send failure" without reading the answer, which the
    /// kernel still holds (a reset drops what was to be sent, not what arrived). Such a send is
    /// told it went out: libcurl reads the answer next, stops sending on a final status of 300 or
    /// more (and the transfer ends early on a 2xx whose body came whole: `UpstreamTransfer`), and a
    /// later send, with nothing left to read, fails as before (RFC 9112 §9.5: a client that sees
    /// such an answer stops sending the body). A send that fails with nothing to read (the
    /// upstream reset without answering) fails at once, as before. Without the tuning, Upstream
    /// relays such an answer from the closing connection instead (`UpstreamTransfer+EarlyAnswer`),
    /// over plain HTTP; this lets libcurl read it itself, over TLS too.
    private static func answeredBeforeReset(_ fd: CInt) -> Bool {
        let error = errno
        defer { errno = error }
        guard error == ECONNRESET || error == EPIPE else { return false }
        if ReadAhead.block(of: fd) != nil { return true }
        var byte: UInt8 = 0
        return recvfrom(fd, &byte, 1, CInt(MSG_PEEK | MSG_DONTWAIT), nil, nil) > 0
    }
}
