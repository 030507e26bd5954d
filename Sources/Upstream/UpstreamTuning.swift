import EventLoop

/// A tuning of the system calls libcurl makes for a loop's client, plugged in at start (the
/// executable's `CurlTuning` target). The client works the same without one: it runs libcurl
/// plainly and tells no one what its loop knows.
///
/// What the client tells it: when libcurl runs (a pass: `runLibcurl(strict:_:)`), what the loop knows
/// of each connection's readiness (`know(_:of:)`), when curl opens and closes a socket, and when
/// body bytes move. What it asks: whether the tuning holds bytes read from a socket that no wait
/// will report (`holdsBytes(for:)`, `stalled`). The tuning runs libcurl again on a socket through
/// the `rerun` it was made with.
public protocol UpstreamTuning: AnyObject {
    /// The tuning of the client of `loop`. `rerun` runs libcurl on a socket curl watches for
    /// reading, as if a wait had reported it readable (false: curl does not watch it for reading).
    init(loop: EventLoop, rerun: @escaping (CInt) -> Bool)

    /// Runs one pass of libcurl (`body`: a `curl_multi_socket_action`, an unpause); a pass begun
    /// within another joins it. With `strict`, every readiness check libcurl makes in `body`
    /// reaches the kernel (a request with a body may be choosing a pooled connection).
    func runLibcurl(strict: Bool, _ body: () -> Void)

    /// The last pass left bytes held for a socket curl watches for reading that no run of it read:
    /// the loop's next turn must run those sockets again (`stalledSockets`).
    var stalled: Bool { get }

    /// The sockets that may hold bytes, for the loop's next turn to run those that still do and
    /// that curl watches; clears `stalled`.
    func stalledSockets() -> [CInt]

    /// Whether bytes read from `fd` ahead of libcurl are held for it: no wait reports them.
    func holdsBytes(for fd: CInt) -> Bool

    /// What the loop now knows of `fd`'s readiness.
    func know(_ readiness: SocketReadiness, of fd: CInt)

    /// curl opened a socket numbered `fd`: nothing known of an earlier one with that number holds.
    func opened(_ fd: CInt)

    /// curl is about to close `fd`: the tuning lets go of it (the number may name another socket next).
    func closing(_ fd: CInt)

    /// libcurl handed over or asked for body bytes (a write or read callback).
    func bodyMoved()
}

/// What the loop knows of a curl socket's readiness, for libcurl's zero-timeout checks of it
/// (`CurlSocket.readiness`).
public enum SocketReadiness: UInt8, Sendable {
    /// Nothing: every check is the kernel's.
    case unknown = 0
    /// Parked between transfers, registered for reading, and nothing came on it as of a wait
    /// begun after the parking (`ParkedSockets`).
    case quiet = 1
    /// Parked, connected, registered for reading, not yet through such a wait.
    case parked = 2
    /// Parked and turned readable: an EOF, or bytes no request asked for. Never to be reused.
    case spoiled = 3
    /// Connected, and curl watches it for reading (the loop has it registered, level-triggered).
    case watched = 4
}
