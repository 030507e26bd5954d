/// The lifecycle of one client connection as a value (docs/ARCHITECTURE.md §3): events in,
/// decisions out; `HTTPConnection` performs the I/O. Deadlines are the slow-loris, idle and send
/// timeouts.
public struct ConnectionStateMachine: Sendable {
    /// Where the connection is in its current exchange.
    public enum Phase: Sendable, Equatable {
        /// Between requests, no byte of the next one yet.
        case idle
        /// Some bytes of a head arrived; the header timeout runs from the first of them.
        case readingHead
        /// The head is in; its body is arriving (or being drained after an early response).
        case readingBody
        /// The request is complete; the response is not.
        case awaitingResponse
        /// Nothing more will happen.
        case closed
    }

    /// What the owner should do after an event.
    public enum Decision: Sendable, Equatable {
        /// Carry on.
        case proceed
        /// Parse the next request (pipelined bytes may already be buffered).
        case readNextRequest
        /// Close the connection now.
        case close
    }

    /// Current phase.
    public private(set) var phase: Phase = .idle
    /// When the connection times out, if a timeout applies now.
    public private(set) var deadline: NanoTime?
    /// Whether the client may keep the connection after the current response.
    public private(set) var keepAlive = true
    /// Whether the client shut down its sending side.
    public private(set) var inputClosed = false
    private var requestDone = false
    private var responseDone = false
    private var isFirstRequest = true
    private var shuttingDown = false
    private var outputBlocked = false
    private let headerTimeout: Double
    private let idleTimeout: Double

    /// A new connection accepted at `now`: the first request must arrive within the header timeout.
    public init(now: NanoTime, headerTimeout: Double, idleTimeout: Double) {
        self.headerTimeout = headerTimeout
        self.idleTimeout = idleTimeout
        deadline = now.adding(seconds: headerTimeout)
    }

    /// Bytes of a request head arrived.
    public mutating func headBytesReceived(now: NanoTime) {
        guard phase == .idle else { return }
        phase = .readingHead
        if !isFirstRequest { deadline = now.adding(seconds: headerTimeout) }
    }

    /// A whole head was parsed.
    public mutating func headReceived(now: NanoTime, keepAlive: Bool, hasBody: Bool) {
        precondition(phase == .idle || phase == .readingHead, "head in phase \(phase)")
        isFirstRequest = false
        self.keepAlive = keepAlive && !shuttingDown
        requestDone = !hasBody
        responseDone = false
        phase = hasBody ? .readingBody : .awaitingResponse
        deadline = hasBody ? now.adding(seconds: idleTimeout) : nil
    }

    /// Body bytes arrived: the idle timeout restarts.
    public mutating func bodyProgress(now: NanoTime) {
        if phase == .readingBody { deadline = now.adding(seconds: idleTimeout) }
    }

    /// The request body ended.
    public mutating func bodyEnded(now: NanoTime) -> Decision {
        precondition(phase == .readingBody, "body end in phase \(phase)")
        requestDone = true
        if responseDone { return exchangeComplete(now: now) }
        phase = .awaitingResponse
        deadline = outputBlocked ? now.adding(seconds: idleTimeout) : nil
        return .proceed
    }

    /// The response was fully queued. `mustClose` when the unread rest of the body cannot be drained.
    public mutating func responseEnded(now: NanoTime, mustClose: Bool = false) -> Decision {
        responseDone = true
        if mustClose { keepAlive = false }
        guard requestDone else {
            guard mustClose else { return .proceed }
            phase = .closed
            return .close
        }
        return exchangeComplete(now: now)
    }

    /// Whether this response should carry `Connection: close`.
    public var closesAfterResponse: Bool { !keepAlive || shuttingDown || inputClosed }

    /// The client shut down its sending side (read returned 0).
    public mutating func inputEnded() -> Decision {
        inputClosed = true
        switch phase {
        case .idle, .readingHead, .readingBody, .closed:
            phase = .closed
            return .close
        case .awaitingResponse:
            // A FIN while the response is pending is the client going away (what nginx treats as
            // a client abort): close now, so the upstream transfer is cancelled at once rather
            // than answered into a socket nobody reads.
            phase = .closed
            return .close
        }
    }

    /// Output could not be written fully (true) or drained again (false): a stalled reader times out.
    public mutating func outputBlocked(_ blocked: Bool, now: NanoTime) {
        outputBlocked = blocked
        // A head in progress keeps its (shorter) header deadline.
        if blocked && phase != .readingHead { deadline = now.adding(seconds: idleTimeout) }
        else if phase == .awaitingResponse { deadline = nil }
    }

    /// The deadline passed (or the timer fired early): close if it really passed.
    public mutating func timerFired(now: NanoTime) -> Decision {
        guard let deadline, deadline <= now else { return .proceed }
        phase = .closed
        return .close
    }

    /// The server is shutting down: idle connections close now, busy ones after their response.
    public mutating func shutdown() -> Decision {
        shuttingDown = true
        keepAlive = false
        switch phase {
        case .idle, .closed:
            phase = .closed
            return .close
        case .readingHead, .readingBody, .awaitingResponse:
            return .proceed
        }
    }

    /// The response has no length and no chunking (an HTTP/1.0 client): its end is the close.
    public mutating func responseWillBeCloseDelimited() { keepAlive = false }

    /// An error made the connection unusable.
    public mutating func failed() { phase = .closed }

    private mutating func exchangeComplete(now: NanoTime) -> Decision {
        guard keepAlive && !inputClosed && !shuttingDown else {
            phase = .closed
            return .close
        }
        phase = .idle
        deadline = now.adding(seconds: idleTimeout)
        return .readNextRequest
    }
}
