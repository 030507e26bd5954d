import EventLoop

/// The lifecycle of one client connection as a value: one enum with payloads, events in, actions
/// out. `HTTPConnection` performs the I/O the actions name and keeps no lifecycle of its own; what
/// it reads next and whether it watches for input are derived from the state (`reading`,
/// `readInterest`), as are the deadlines (slow-loris, idle, stalled body, stalled reader), never
/// stored beside it.
public struct ConnectionStateMachine: Sendable {
    /// Whether the connection may carry another request after the current response.
    public enum Persistence: Sendable, Equatable {
        case keepAlive
        case close
    }

    /// Whether request body bytes are read and delivered, or held in the socket by the handler.
    public enum BodyFlow: Sendable, Equatable {
        case flowing
        case paused
    }

    /// `Expect: 100-continue` bookkeeping for one request body.
    public enum Continue: Sendable, Equatable {
        /// The client sends its body unasked.
        case notExpected
        /// The client waits for `100 Continue`, which was not sent (an early answer leaves the body
        /// unsent: it cannot be drained, so the connection closes after the response).
        case owed
        /// `100 Continue` was queued.
        case sent
    }

    /// The request side of an exchange.
    public enum RequestState: Sendable, Equatable {
        /// Body bytes are arriving; the idle timeout runs from the last of them.
        case body(BodyFlow, Continue, lastProgress: NanoTime)
        /// The request is complete.
        case complete
    }

    /// Who waits for queued output to drain.
    public enum Writer: Sendable, Equatable {
        /// Nobody.
        case ready
        /// A writer was told `canWrite == false` and is owed a `writable` event.
        case waiting
    }

    /// The response side of an exchange.
    public enum ResponseState: Sendable, Equatable {
        /// Nothing queued yet.
        case pending
        /// The head is queued; body may follow.
        case streaming(Writer)
        /// The response was fully queued.
        case complete

        /// Pattern matches, cheaper on the hot path than the synthesized `==`.
        var isPending: Bool { if case .pending = self { true } else { false } }
        var isComplete: Bool { if case .complete = self { true } else { false } }
    }

    /// One request and its response, progressing independently (an early response drains the
    /// rest of the body; a pipelined head waits for the response).
    public struct Exchange: Sendable, Equatable {
        public var request: RequestState
        public var response: ResponseState
        public var persistence: Persistence
    }

    /// Where the connection is.
    public enum State: Sendable, Equatable {
        /// Accepted, no byte of the first request yet: the header timeout runs from accept.
        case accepted(deadline: NanoTime)
        /// Between requests: the idle timeout runs.
        case idle(deadline: NanoTime)
        /// Some bytes of a head arrived: the header timeout runs (from the first byte, or from
        /// accept for the first request). `persistence` is `.close` once shutdown began.
        case readingHead(deadline: NanoTime, persistence: Persistence)
        /// A head is in.
        case exchange(Exchange)
        /// Nothing more is read; what is queued is written, then the connection closes.
        /// `reason` is logged for an exchange that had not ended.
        case closing(reason: String?)
        /// Closed.
        case closed
        /// The socket left for a tunnel (an accepted upgrade): this connection reads, writes and
        /// times out no more, and does not close the descriptor.
        case handedOver
    }

    /// Whether queued output drains.
    public enum Output: Sendable, Equatable {
        case drained
        /// A write could not complete at `since`; a reader that stays stalled times out.
        case blocked(since: NanoTime)
    }

    /// What the owner must do after an event. A small enum (one string pointer of payload):
    /// returning it allocates nothing.
    public enum Action: Sendable, Equatable {
        /// Nothing.
        case none
        /// A deadline began that may be earlier than the armed timer: arm it for `deadline`.
        case armTimer
        /// Hand the body bytes just decoded to the handler.
        case deliverBody
        /// Tell the handler its request body ended.
        case deliverBodyEnd
        /// The handler wants its paused body again: parse what is buffered and read on.
        case resumeBody
        /// Drop the queued response (none of its bytes left) so another can replace it.
        case dropResponse
        /// Parse the next request (pipelined bytes may already be buffered).
        case readNextRequest
        /// Queue `100 Continue`.
        case sendContinue
        /// Tell the writer it may queue again.
        case notifyWritable
        /// Write what is queued, then close (the state is `.closing`).
        case flushAndClose
        /// Close now, dropping queued output (the state is `.closed`).
        case close(reason: String?)
        /// Give the socket, with the bytes read past the head, to a tunnel (the state is `.handedOver`).
        case handOver
    }

    /// What the connection parses from its input next.
    public enum Reading: Sendable, Equatable {
        /// A request head.
        case head
        /// Request body bytes (delivered, or drained once the response ended: `bodyReceived` says).
        case body
        /// Nothing now: the request is in and its response pending, or the handler holds the body,
        /// or the connection closes.
        case nothing
        /// Nothing ever again: the connection is closed.
        case closed
    }

    /// Whether the connection watches its socket for input.
    public enum ReadInterest: Sendable, Equatable {
        /// Yes.
        case read
        /// While the input buffer has room: pipelined requests wait behind the current response,
        /// and reading on notices a FIN (client gone) at once.
        case readUnlessFull
        /// No: the body is held, the connection closes, or a stalled reader blocks output.
        case none
    }

    public private(set) var state: State
    public private(set) var output: Output = .drained
    private let headerTimeout: Double
    private let idleTimeout: Double

    /// A new connection accepted at `now`: the first request must arrive within the header timeout.
    public init(now: NanoTime, headerTimeout: Double, idleTimeout: Double) {
        self.headerTimeout = headerTimeout
        self.idleTimeout = idleTimeout
        state = .accepted(deadline: now.adding(seconds: headerTimeout))
    }

    // MARK: derived

    /// When the connection times out, if a timeout applies now.
    public var deadline: NanoTime? {
        let stalledReader: NanoTime? =
            if case .blocked(let since) = output { since.adding(seconds: idleTimeout) } else { nil }
        switch state {
        case .accepted(let deadline), .readingHead(let deadline, _):
            // A head in progress keeps its (shorter) header deadline.
            return deadline
        case .idle(let deadline):
            return stalledReader ?? deadline
        case .exchange(let exchange):
            guard case .body(_, _, let last) = exchange.request else { return stalledReader }
            let body = last.adding(seconds: idleTimeout)
            guard let stalledReader else { return body }
            return max(body, stalledReader)
        case .closing:
            return stalledReader
        case .closed, .handedOver:
            return nil
        }
    }

    /// What the connection parses from its input next.
    public var reading: Reading {
        switch state {
        case .accepted, .idle, .readingHead: return .head
        case .exchange(let exchange):
            guard case .body(let flow, _, _) = exchange.request else { return .nothing }
            // A paused body is still drained once the response ended.
            return flow == .flowing || exchange.response.isComplete ? .body : .nothing
        case .closing: return .nothing
        case .closed, .handedOver: return .closed
        }
    }

    /// Whether the socket is watched for input.
    public var readInterest: ReadInterest {
        if case .blocked = output { return .none }
        switch state {
        case .accepted, .idle, .readingHead: return .read
        case .exchange(let exchange):
            if case .body(let flow, _, _) = exchange.request {
                return flow == .flowing || exchange.response.isComplete ? .read : .none
            }
            // Read on while the response is pending: a FIN (client gone) is noticed at once.
            return .readUnlessFull
        case .closing, .closed, .handedOver: return .none
        }
    }

    // MARK: request events

    /// Bytes of a request head arrived: after an idle wait, the header timeout starts.
    public mutating func headBytesReceived(now: NanoTime) -> Action {
        switch state {
        case .accepted(let deadline):
            state = .readingHead(deadline: deadline, persistence: .keepAlive)
            return .none
        case .idle:
            state = .readingHead(deadline: now.adding(seconds: headerTimeout), persistence: .keepAlive)
            return .armTimer
        case .readingHead, .exchange, .closing, .closed, .handedOver:
            return .none
        }
    }

    /// A whole head was parsed: a body's idle timeout starts.
    public mutating func headReceived(now: NanoTime, keepAlive: Bool, hasBody: Bool, expectsContinue: Bool = false)
        -> Action
    {
        let persistence: Persistence
        switch state {
        case .accepted, .idle: persistence = .keepAlive
        case .readingHead(_, let p): persistence = p
        case .exchange, .closing, .closed, .handedOver: preconditionFailure("head in state \(state)")
        }
        let request: RequestState =
            hasBody ? .body(.flowing, expectsContinue ? .owed : .notExpected, lastProgress: now) : .complete
        state = .exchange(Exchange(request: request, response: .pending, persistence: keepAlive ? persistence : .close))
        return hasBody ? .armTimer : .none
    }

    /// The handler returned from `handle`: a client waiting for `100 Continue` is invited unless
    /// it was already answered.
    public mutating func handlerReturned() -> Action {
        guard case .exchange(var exchange) = state, case .body(let flow, .owed, let last) = exchange.request,
            exchange.response.isPending
        else { return .none }
        exchange.request = .body(flow, .sent, lastProgress: last)
        state = .exchange(exchange)
        return .sendContinue
    }

    /// Body bytes were decoded: the idle timeout restarts, and they go to the handler unless its
    /// response ended (then they are only drained).
    public mutating func bodyReceived(now: NanoTime) -> Action {
        guard case .exchange(var exchange) = state, case .body(let flow, let expect, _) = exchange.request else {
            return .none
        }
        exchange.request = .body(flow, expect, lastProgress: now)
        state = .exchange(exchange)
        return exchange.response.isComplete ? .none : .deliverBody
    }

    /// The handler holds (`.paused`) or wants (`.flowing`) the body.
    public mutating func setBodyFlow(_ flow: BodyFlow) -> Action {
        guard case .exchange(var exchange) = state, case .body(let old, let expect, let last) = exchange.request,
            old != flow
        else { return .none }
        exchange.request = .body(flow, expect, lastProgress: last)
        state = .exchange(exchange)
        return flow == .flowing ? .resumeBody : .none
    }

    /// The request body ended. The request is complete before the handler hears it
    /// (`deliverBodyEnd`): an answer given from that event completes the exchange at once.
    public mutating func bodyEnded(now: NanoTime) -> Action {
        guard case .exchange(var exchange) = state, case .body = exchange.request else { return .none }
        exchange.request = .complete
        if exchange.response.isComplete { return exchangeComplete(now: now, exchange.persistence) }
        state = .exchange(exchange)
        return .deliverBodyEnd
    }

    // MARK: response events

    /// A response head is being queued. `closeDelimited`: its body ends with the connection
    /// (HTTP/1.0, no length). Returns whether the head says `Connection: close` (`.close`) or
    /// keeps the connection.
    public mutating func responseStarted(closeDelimited: Bool = false) -> Persistence {
        guard case .exchange(var exchange) = state else { return .close }
        guard exchange.response.isPending else { return exchange.persistence }
        exchange.response = .streaming(.ready)
        if closeDelimited { exchange.persistence = .close }
        state = .exchange(exchange)
        return exchange.persistence
    }

    /// The handler takes back a started response none of whose bytes left (an error replaces it):
    /// `dropResponse` unless the connection already closes.
    public mutating func responseRetracted() -> Action {
        guard case .exchange(var exchange) = state, case .streaming = exchange.response else { return .none }
        exchange.response = .pending
        state = .exchange(exchange)
        return .dropResponse
    }

    /// The response was fully queued.
    public mutating func responseEnded(now: NanoTime) -> Action {
        guard case .exchange(var exchange) = state else { return .none }
        exchange.response = .complete
        switch exchange.request {
        case .body(_, .owed, _):
            // The client still waits for 100 Continue before sending the body: it cannot be drained.
            state = .closing(reason: nil)
            return .flushAndClose
        case .body:
            // An early response: the rest of the body is read and dropped, then the next request.
            state = .exchange(exchange)
            return .none
        case .complete:
            return exchangeComplete(now: now, exchange.persistence)
        }
    }

    /// The writer was told it may not queue more: it is owed `notifyWritable` once output drains.
    public mutating func writerRefused() {
        guard case .exchange(var exchange) = state, case .streaming = exchange.response else { return }
        exchange.response = .streaming(.waiting)
        state = .exchange(exchange)
    }

    // MARK: output events

    /// A write could not complete: a reader that stays stalled times out.
    public mutating func outputBlocked(now: NanoTime) -> Action {
        guard case .drained = output, !isClosedState else { return .none }
        output = .blocked(since: now)
        return .armTimer
    }

    /// Queued output shrank below the low-water mark (`empty`: all of it was written).
    public mutating func outputDrained(empty: Bool) -> Action {
        if empty {
            output = .drained
            if case .closing(let reason) = state {
                state = .closed
                return .close(reason: reason)
            }
        }
        guard case .exchange(var exchange) = state, case .streaming(.waiting) = exchange.response else { return .none }
        exchange.response = .streaming(.ready)
        state = .exchange(exchange)
        return .notifyWritable
    }

    // MARK: connection events

    /// The client shut down its sending side (read returned 0). A FIN while a response is pending
    /// is the client going away (nginx's client abort): close now, so upstream work is cancelled
    /// at once rather than answered into a socket nobody reads.
    public mutating func inputEnded() -> Action {
        let reason: String
        switch state {
        case .closed, .handedOver: return .none
        case .closing(let closing): reason = closing ?? "client_closed"
        case .exchange(let exchange):
            if case .body = exchange.request { reason = "client_closed_mid_request" } else { reason = "client_closed" }
        case .accepted, .idle, .readingHead: reason = "client_closed"
        }
        state = .closed
        return .close(reason: reason)
    }

    /// The timer fired: close if the deadline really passed (it may have moved since it was armed).
    public mutating func timerFired(now: NanoTime) -> Action {
        guard let deadline, deadline <= now else { return .none }
        state = .closed
        return .close(reason: "timeout")
    }

    /// The server is shutting down: idle connections close once what is queued is written, busy
    /// ones after their response.
    public mutating func shutdown() -> Action {
        switch state {
        case .accepted:
            state = .closed
            return .close(reason: nil)
        case .idle:
            // The last response may still be queued (an event stream ended by this very
            // shutdown, a keep-alive response not yet flushed): written first, then the close.
            state = .closing(reason: nil)
            return .flushAndClose
        case .readingHead(let deadline, _):
            state = .readingHead(deadline: deadline, persistence: .close)
        case .exchange(var exchange):
            exchange.persistence = .close
            state = .exchange(exchange)
        case .closing, .closed, .handedOver:
            break
        }
        return .none
    }

    /// The exchange cannot go on (a response cut short, a refused request): write what is queued,
    /// then close. `reason` is logged for an exchange that had not ended.
    public mutating func closeAfterFlush(reason: String?) -> Action {
        switch state {
        case .closed, .handedOver: return .none
        case .closing: return .flushAndClose
        case .accepted, .idle, .readingHead, .exchange:
            state = .closing(reason: reason)
            return .flushAndClose
        }
    }

    /// Close now (an I/O error, the shutdown deadline).
    public mutating func closeNow(reason: String?) -> Action {
        if isClosedState { return .none }
        state = .closed
        return .close(reason: reason)
    }

    /// A pattern match, cheaper than the synthesized `==` on the state.
    /// Whether the connection no longer owns its socket (closed, or handed over to a tunnel).
    public var isGone: Bool { isClosedState }

    private var isClosedState: Bool {
        switch state {
        case .closed, .handedOver: true
        default: false
        }
    }

    /// The handler accepted an upgrade of the current exchange (its request complete, no byte
    /// of a response queued): the socket leaves for a tunnel.
    public mutating func upgraded() -> Action {
        guard case .exchange(let exchange) = state, exchange.request == .complete, exchange.response.isPending else {
            return .none
        }
        state = .handedOver
        return .handOver
    }

    private mutating func exchangeComplete(now: NanoTime, _ persistence: Persistence) -> Action {
        guard persistence == .keepAlive else {
            state = .closing(reason: nil)
            return .flushAndClose
        }
        state = .idle(deadline: now.adding(seconds: idleTimeout))
        return .readNextRequest
    }
}
