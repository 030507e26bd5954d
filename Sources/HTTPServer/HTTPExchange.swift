import EventLoop
import HTTP1

/// One request and its response, handed to the handler on the loop thread.
///
/// The handler answers through `respond` (whole body) or `startResponse` / `writeBody` /
/// `endResponse` (streamed). Whoever consumes the request body or streams the response sets
/// itself as the `delegate`: it receives the body, the writable and finished events, and the
/// exchange is its single owner (released after `exchange(_:finished:)`).
public final class HTTPExchange {
    /// The request head.
    public let head: HTTPRequestHead
    /// The client's address (`unix` for a Unix socket).
    public let peer: String
    /// Index of the listen address (`ServerConfiguration.addresses`) the connection came in on.
    public let listener: Int
    /// When the head was complete.
    public let startedAt: NanoTime
    /// The loop that owns this exchange.
    public let loop: EventLoop
    /// Cleared when the exchange finished, the connection closed or moved to its next request
    /// (`finish`, `HTTPConnection.perform`): a strong reference, as a weak one would give every
    /// connection a side table, whose retains take the slow path (`bench/cost-profile.sh`), and
    /// no cycle outlives the exchange.
    var connection: HTTPConnection?

    /// Receives this exchange's events; held until the exchange finished.
    public var delegate: (any HTTPExchangeDelegate)?

    /// How the response body is delimited on the wire, once a head was queued.
    enum BodyFraming: Equatable {
        /// `Content-Length`: never more than this many bytes.
        case length(Int)
        /// `Transfer-Encoding: chunked`.
        case chunked
        /// Ends with the connection (HTTP/1.0, no length).
        case closeDelimited
        /// No body (HEAD, 204, 304).
        case bodiless
        /// The handler offered more than the declared length: the rest was dropped, the connection closes.
        case overran
    }

    /// Where the response is.
    enum Progress: Equatable {
        case pending
        case started(BodyFraming)
        case ended
        /// The connection went away (or refused the rest) before the response ended.
        case aborted
    }

    var progress: Progress = .pending

    /// The status sent, once started (0 before, and after a retraction).
    public internal(set) var status = 0
    /// Body bytes queued for the client.
    public internal(set) var bytesSent = 0
    /// Request body bytes received.
    public internal(set) var bytesReceived = 0

    init(
        head: consuming HTTPRequestHead, peer: String, listener: Int, startedAt: NanoTime, loop: EventLoop,
        connection: HTTPConnection
    ) {
        self.head = head
        self.peer = peer
        self.listener = listener
        self.startedAt = startedAt
        self.loop = loop
        self.connection = connection
    }

    /// Whether a response head was queued.
    public var responseStarted: Bool { if case .pending = progress { false } else { true } }
    /// Whether the response ended.
    public var responseEnded: Bool { if case .ended = progress { true } else { false } }
    /// Whether the connection went away before the response ended.
    public var isAborted: Bool { if case .aborted = progress { true } else { false } }
    /// Whether the outcome was reported (ended or aborted).
    var isFinished: Bool {
        switch progress {
        case .ended, .aborted: true
        case .pending, .started: false
        }
    }
    /// Whether the request method is HEAD (a response carries no body).
    public var isHeadRequest: Bool { head.methodIs("HEAD") }

    /// Sends a whole response; `Content-Length` (and `Connection: close` when closing) are added.
    public func respond(status: Int, headers: [(name: String, value: String)], body: [UInt8]) {
        guard let connection, !responseStarted else { return }
        body.withUnsafeBytes { connection.respond(self, status: status, headers: headers, body: $0) }
    }

    /// How a streamed response body is delimited.
    public enum ResponseFraming: Sendable, Equatable {
        /// Exactly this many bytes follow (`Content-Length`).
        case length(Int)
        /// Length unknown: chunked for HTTP/1.1 clients, close-delimited for 1.0.
        case streamed
        /// No body and no framing header (1xx, 204, 304).
        case bodiless
    }

    /// Starts a streamed response.
    public func startResponse(status: Int, headers: [(name: String, value: String)], framing: ResponseFraming) {
        startResponse(status: status, framing: framing) { head in
            for (name, value) in headers { head.writeField(name, value) }
        }
    }

    /// Starts a streamed response whose fields `writeFields` appends as `Name: value\r\n` lines
    /// (the caller vouches they hold no CR, LF or NUL); framing fields are added after them.
    public func startResponse(status: Int, framing: ResponseFraming, writeFields: (inout ResponseHeadWriter) -> Void) {
        guard let connection, !responseStarted else { return }
        connection.startResponse(self, status: status, framing: framing, writeFields: writeFields)
    }

    /// Queues body bytes of a streamed response.
    public func writeBody(_ bytes: UnsafeRawBufferPointer) {
        guard let connection, case .started = progress else { return }
        connection.writeBody(self, bytes)
    }

    /// Ends a streamed response.
    public func endResponse() {
        guard let connection, case .started = progress else { return }
        connection.endResponse(self)
    }

    /// Closes the client connection: a streamed response cannot be finished. What was queued is
    /// flushed first, so the client gets the head and partial body before the close.
    public func abort(reason: String) { connection?.abort(self, reason: reason) }

    /// Takes back a started response of which nothing reached the client yet (true), so an error
    /// response can replace it; false when bytes already left.
    public func retractResponse() -> Bool { connection?.retract(self) ?? false }

    /// Whether more output may be queued without exceeding the high-water mark; after a false,
    /// the delegate hears `exchangeWritable` once the output drained below the low-water mark.
    public var canWrite: Bool { connection?.canWrite(self) ?? false }

    /// Whether fewer than `limit` bytes wait for the socket; after a false, the delegate hears
    /// `exchangeWritable` as the output drains (below the low-water mark, or empty), and may ask again.
    public func canWrite(below limit: Int) -> Bool { connection?.canWrite(self, below: limit) ?? false }

    /// Bytes queued on the connection that the socket has not taken yet (0 once it closed).
    public var queuedBytes: Int { connection?.queuedBytes ?? 0 }

    /// Accepts this exchange's upgrade: the client socket leaves the HTTP connection for a tunnel
    /// (`HTTPConnection.handOver`), and the exchange ends as a `101`. Nil when the connection is
    /// gone or cannot hand over; the caller then owns nothing.
    public func handOver() -> HandedOverSocket? { connection?.handOver(self) }

    /// Stops delivering request body until `resumeBody` (the socket is not read meanwhile).
    public func pauseBody() { connection?.setBodyFlow(self, .paused) }

    /// Resumes request body delivery.
    public func resumeBody() { connection?.setBodyFlow(self, .flowing) }

    /// The outcome, reported once: to the delegate (then released) and to the handler.
    func finish(_ ending: ExchangeOutcome.Ending, handler: any HTTPHandler) {
        let outcome = ExchangeOutcome(ending: ending, status: status, bytesIn: bytesReceived, bytesOut: bytesSent)
        connection = nil
        let delegate = self.delegate
        delegate?.exchange(self, finished: outcome)
        handler.finished(self, outcome: outcome)
        // After the handler logged (it may read the delegate): the exchange was its single owner.
        self.delegate = nil
    }
}

/// How an exchange ended, reported once to its delegate and to the handler (the access log).
public struct ExchangeOutcome: Sendable, Equatable {
    /// Why it ended.
    public enum Ending: Sendable, Equatable {
        /// The response was fully queued.
        case completed
        /// The response was fully queued, but the handler offered more body than its
        /// `Content-Length`: the rest was dropped and the connection closed.
        case truncated
        /// The client went away (FIN or reset) before the response ended; the reason as logged
        /// (`client_closed`, `client_closed_mid_request`).
        case clientClosed(String)
        /// The connection closed before the response ended for another reason (`timeout`,
        /// `write_error`, a response cut short with `abort(reason:)`, `shutdown_deadline`).
        case aborted(String)
        /// The server answered with an error itself (a malformed or too large request) and closes;
        /// the reason as logged.
        case refused(String)
    }

    /// Why it ended.
    public let ending: Ending
    /// The response status sent (0 when no response was started).
    public let status: Int
    /// Request body bytes received.
    public let bytesIn: Int
    /// Response body bytes queued.
    public let bytesOut: Int

    /// The reason an exchange that did not complete carries, nil for `.completed` and `.truncated`.
    public var reason: String? {
        switch ending {
        case .completed, .truncated: nil
        case .clientClosed(let reason), .aborted(let reason), .refused(let reason): reason
        }
    }
}

/// A client socket handed to a tunnel: the caller closes `fd`. `early` holds the bytes the client
/// sent past the upgrade request's head (a client may send its first frames without waiting).
public struct HandedOverSocket: Sendable {
    public let fd: CInt
    public let early: [UInt8]
}
