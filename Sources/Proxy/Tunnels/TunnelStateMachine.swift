/// The lifecycle of one tunnel (an upgraded connection: a WebSocket) as a value: events in,
/// actions out (docs/architecture.md, "State machines as values"). `Tunnel` performs the I/O the
/// actions name; which side is read or written and when it closes follow from the state.
struct TunnelStateMachine: Equatable {
    /// One end of the tunnel.
    enum Side: Equatable {
        case client
        case upstream
    }

    /// Where the tunnel is.
    enum State: Equatable {
        /// libcurl connects to the upstream (TLS included); the client waits for the answer.
        case connecting
        /// The upgrade request goes up; the upstream's answer head is awaited.
        case handshaking
        /// The upstream refused the upgrade (not 101): the rest of its answer is read, to be relayed.
        case refused
        /// The upstream answered 101 and the client has it: bytes move both ways.
        case open
        /// Nothing more is read; what is queued toward `toward` is written, then both close.
        case draining(reason: String, toward: Side)
        /// Both sides closed (or the exchange was answered without a tunnel).
        case closed(reason: String)
    }

    /// Why no tunnel opened, answered to the client as an error.
    enum Failure: Equatable {
        /// libcurl could not connect (its message).
        case unreachable(String)
        /// The upstream is one of the proxy's own listeners.
        case loop
        /// The upstream's answer did not come within the route's `timeoutSeconds`.
        case timeout
        /// The upstream's answer was not an HTTP/1.1 response head.
        case invalidAnswer
        /// The tunnel was closed (logout, shutdown) before it opened.
        case withdrawn(String)
    }

    /// What the owner must do.
    enum Action: Equatable {
        case none
        /// Write the upgrade request, with the route's credentials, to the upstream.
        case sendHandshake
        /// Read the rest of the upstream's refusal (its body).
        case readRefusal
        /// Answer the client with the upstream's (non-101) answer, then close the upstream side.
        case relayAnswer
        /// Answer the client with an error; close the upstream side.
        case fail(Failure)
        /// Take the client socket from its HTTP connection, relay the 101 head and move bytes.
        case openBridge
        /// Stop reading; write what is queued toward the side named by the state, then close.
        case drain
        /// Tell the client the tunnel ends (a WebSocket close frame), then drain toward it.
        case sayGoodbye
        /// Close both sides now.
        case close(reason: String)
    }

    private(set) var state: State = .connecting

    /// Whether bytes are read from the sides (only while open).
    var isOpen: Bool { state == .open }

    /// Whether the tunnel is over.
    var isClosed: Bool { if case .closed = state { true } else { false } }

    /// libcurl connected to the upstream.
    mutating func connected() -> Action {
        guard state == .connecting else { return .none }
        state = .handshaking
        return .sendHandshake
    }

    /// libcurl could not connect (`loop`: it reached one of the proxy's own listeners).
    mutating func connectFailed(_ message: String, loop: Bool = false) -> Action {
        guard state == .connecting else { return .none }
        state = .closed(reason: loop ? "loop_detected" : "upstream_unreachable")
        return .fail(loop ? .loop : .unreachable(message))
    }

    /// The upstream's answer head arrived: 101 opens the tunnel, any other status is relayed as
    /// the answer to the request.
    mutating func answered(status: Int) -> Action {
        guard state == .handshaking else { return .none }
        if status == 101 {
            state = .open
            return .openBridge
        }
        state = .refused
        return .readRefusal
    }

    /// The refusal's body was read (or its upstream ended): it is relayed as the answer.
    mutating func refusalRead() -> Action {
        guard state == .refused else { return .none }
        state = .closed(reason: "upgrade_refused")
        return .relayAnswer
    }

    /// The upstream answered something that is not a response head.
    mutating func answerInvalid() -> Action {
        guard state == .handshaking else { return .none }
        state = .closed(reason: "upstream_invalid_answer")
        return .fail(.invalidAnswer)
    }

    /// The answer (its head, or a refusal's body) did not come in time.
    mutating func answerTimedOut() -> Action {
        guard state == .handshaking || state == .refused else { return .none }
        state = .closed(reason: "upstream_timeout")
        return .fail(.timeout)
    }

    /// `side` ended its stream (EOF). While open, what is queued toward the other side is still
    /// written (a WebSocket close frame just before the FIN reaches the peer).
    mutating func ended(_ side: Side) -> Action {
        let reason = side == .client ? "client_closed" : "upstream_closed"
        switch state {
        case .open:
            state = .draining(reason: reason, toward: side == .client ? .upstream : .client)
            return .drain
        case .draining(_, let toward) where toward == side:
            // The side still written to went away: nothing more can be delivered.
            return close(reason)
        case .draining, .closed:
            return .none
        case .connecting, .handshaking, .refused:
            return close(reason)
        }
    }

    /// The queue toward the draining side emptied.
    mutating func drained() -> Action {
        guard case .draining(let reason, _) = state else { return .none }
        return close(reason)
    }

    /// The tunnel is withdrawn (`reason`: logout, a replaced token, a reload moving the route, the
    /// idle timeout, shutdown): an open one says goodbye to the client, an unopened one answers
    /// it with an error.
    mutating func withdraw(_ reason: String) -> Action {
        switch state {
        case .connecting, .handshaking, .refused:
            state = .closed(reason: reason)
            return .fail(.withdrawn(reason))
        case .open:
            state = .draining(reason: reason, toward: .client)
            return .sayGoodbye
        case .draining(_, let toward):
            // Already ending: keep draining, under the new reason only if it was the client's turn.
            guard toward == .upstream else { return .none }
            return close(reason)
        case .closed:
            return .none
        }
    }

    /// An I/O error, or a drain that did not finish in time: close now.
    mutating func failed(_ reason: String) -> Action {
        if case .closed = state { return .none }
        if state == .connecting || state == .handshaking || state == .refused {
            state = .closed(reason: reason)
            return .fail(.unreachable(reason))
        }
        return close(reason)
    }

    private mutating func close(_ reason: String) -> Action {
        state = .closed(reason: reason)
        return .close(reason: reason)
    }
}
