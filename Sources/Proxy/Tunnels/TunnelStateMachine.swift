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
        /// The upstream answered 101: the client socket is being taken from its HTTP connection.
        case bridging
        /// The client has the 101: bytes move both ways.
        case open
        /// Withdrawn while the upstream was in the middle of a WebSocket frame: the client is not
        /// read, the upstream is read up to the end of that frame, then the goodbye follows.
        case finishingFrame(reason: String)
        /// Nothing more is read; what is queued toward `toward` is written, then both close.
        case draining(reason: String, toward: Side)
        /// Both sides closed (or the exchange was answered without a tunnel); `opened`: the
        /// client had the 101 (the tunnel counted as opened).
        case closed(reason: String, opened: Bool)
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
        /// Take the client socket from its HTTP connection (then `bridged` or `failed`).
        case openBridge
        /// Count the tunnel opened, relay the 101 head and move bytes.
        case relay
        /// Stop reading the client; read the upstream up to the end of its frame (then
        /// `frameFinished`), within the goodbye's deadline.
        case finishFrame
        /// Stop reading; write what is queued toward the side named by the state, then close.
        case drain
        /// Tell the client the tunnel ends (a WebSocket close frame), then drain toward it.
        case sayGoodbye
        /// Close both sides now.
        case close(reason: String)
    }

    private(set) var state: State = .connecting

    /// Whether bytes are read from the client (only while open).
    var isOpen: Bool { state == .open }

    /// Whether bytes are read from the upstream toward the client: while open, and to the end of
    /// the frame under way before a goodbye.
    var readsUpstream: Bool {
        switch state {
        case .open, .finishingFrame: true
        default: false
        }
    }

    /// Whether the client had the 101 (the tunnel opened), whatever came after.
    var opened: Bool {
        switch state {
        case .open, .finishingFrame, .draining: true
        case .closed(_, let opened): opened
        case .connecting, .handshaking, .refused, .bridging: false
        }
    }

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
        state = .closed(reason: loop ? "loop_detected" : "upstream_unreachable", opened: false)
        return .fail(loop ? .loop : .unreachable(message))
    }

    /// The upstream's answer head arrived: 101 opens the tunnel, any other status is relayed as
    /// the answer to the request.
    mutating func answered(status: Int) -> Action {
        guard state == .handshaking else { return .none }
        if status == 101 {
            state = .bridging
            return .openBridge
        }
        state = .refused
        return .readRefusal
    }

    /// The client socket was taken over: the tunnel is open.
    mutating func bridged() -> Action {
        guard state == .bridging else { return .none }
        state = .open
        return .relay
    }

    /// The refusal's body was read (or its upstream ended): it is relayed as the answer.
    mutating func refusalRead() -> Action {
        guard state == .refused else { return .none }
        state = .closed(reason: "upgrade_refused", opened: false)
        return .relayAnswer
    }

    /// The upstream answered something that is not a response head.
    mutating func answerInvalid() -> Action {
        guard state == .handshaking else { return .none }
        state = .closed(reason: "upstream_invalid_answer", opened: false)
        return .fail(.invalidAnswer)
    }

    /// The answer (its head, or a refusal's body) did not come in time.
    mutating func answerTimedOut() -> Action {
        guard state == .handshaking || state == .refused else { return .none }
        state = .closed(reason: "upstream_timeout", opened: false)
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
        case .finishingFrame(let withdrawn):
            // The client left, or the upstream ended inside its frame: no goodbye can follow.
            return close(side == .client ? reason : withdrawn)
        case .draining, .closed:
            return .none
        case .connecting, .handshaking, .refused, .bridging:
            return close(reason)
        }
    }

    /// The upstream's frame under way ended: the goodbye follows it.
    mutating func frameFinished() -> Action {
        guard case .finishingFrame(let reason) = state else { return .none }
        state = .draining(reason: reason, toward: .client)
        return .sayGoodbye
    }

    /// The queue toward the draining side emptied.
    mutating func drained() -> Action {
        guard case .draining(let reason, _) = state else { return .none }
        return close(reason)
    }

    /// The tunnel is withdrawn (`reason`: logout, a replaced token, a reload moving the route, the
    /// idle timeout, shutdown): an open one says goodbye to the client, at once when the bytes
    /// toward it end at a frame boundary (`atBoundary`), else once the upstream finished its
    /// frame; an unopened one answers the client with an error.
    mutating func withdraw(_ reason: String, atBoundary: Bool = true) -> Action {
        switch state {
        case .connecting, .handshaking, .refused:
            state = .closed(reason: reason, opened: false)
            return .fail(.withdrawn(reason))
        case .bridging:
            return close(reason)
        case .open where !atBoundary:
            state = .finishingFrame(reason: reason)
            return .finishFrame
        case .open:
            state = .draining(reason: reason, toward: .client)
            return .sayGoodbye
        case .finishingFrame:
            return .none
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
            state = .closed(reason: reason, opened: false)
            return .fail(.unreachable(reason))
        }
        return close(reason)
    }

    private mutating func close(_ reason: String) -> Action {
        state = .closed(reason: reason, opened: opened)
        return .close(reason: reason)
    }
}
