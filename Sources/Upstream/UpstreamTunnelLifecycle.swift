import Glibc

/// The lifecycle of a tunnel's upstream connection (`UpstreamTunnel`) as a value: events in,
/// actions out. Bytes move only while it is connected; the libcurl handle is released once.
struct UpstreamTunnelLifecycle: Equatable {
    /// Where the connection is.
    enum State: Equatable {
        /// libcurl connects (TLS included).
        case connecting
        /// Connected on `fd`: bytes move with `curl_easy_send`/`curl_easy_recv`.
        case connected(fd: CInt)
        /// The connect failed; the handle is still held until `close`.
        case failed
        /// The handle is released.
        case closed
    }

    /// What the owner must do.
    enum Action: Equatable {
        case none
        /// Tell the tunnel the connect ended: nil when bytes may move, else why they cannot.
        case report(UpstreamError?)
        /// Take the handle out of its multi handle and free it (libcurl closes the socket).
        case release
    }

    private(set) var state = State.connecting

    /// The connected socket, -1 when there is none.
    var fd: CInt { if case .connected(let fd) = state { fd } else { -1 } }

    /// The connect finished on `fd`.
    mutating func connected(fd: CInt) -> Action {
        guard state == .connecting else { return .none }
        state = .connected(fd: fd)
        return .report(nil)
    }

    /// The connect failed (or reached a socket the tunnel must not use).
    mutating func connectFailed(_ error: UpstreamError) -> Action {
        guard state == .connecting else { return .none }
        state = .failed
        return .report(error)
    }

    /// The tunnel is done with the connection.
    mutating func close() -> Action {
        guard state != .closed else { return .none }
        state = .closed
        return .release
    }
}
