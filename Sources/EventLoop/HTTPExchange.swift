import HTTP1

/// One request and its response, handed to the handler on the loop thread.
///
/// The handler answers through `respond` (whole body) or `startResponse` / `writeBody` /
/// `endResponse` (streamed), and may set the `on…` hooks to receive the request body,
/// learn that the client went away, or resume writing after backpressure.
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
    weak var connection: HTTPConnection?

    /// Receives each piece of the request body (valid only during the call).
    public var onBody: ((UnsafeRawBufferPointer) -> Void)?
    /// Called once when the request body is complete (at once for bodiless requests).
    public var onEnd: (() -> Void)?
    /// Called once if the connection closes before the response ended.
    public var onAbort: (() -> Void)?
    /// Called when the client shut down its sending side while the response is still open.
    public var onInputClosed: (() -> Void)?
    /// Called when output drained below the low-water mark after `canWrite` was false.
    public var onWritable: (() -> Void)?

    /// Whatever the handler wants to keep with this exchange (request ID, route, …).
    public var context: AnyObject?

    /// Whether a response head was queued.
    public internal(set) var responseStarted = false
    /// Whether the response ended.
    public internal(set) var responseEnded = false
    /// The status sent, once started.
    public internal(set) var status = 0
    /// Body bytes queued for the client.
    public internal(set) var bytesSent = 0
    /// Request body bytes received.
    public internal(set) var bytesReceived = 0
    /// Whether the connection went away before the response ended.
    public internal(set) var isAborted = false
    var chunkedResponse = false
    /// The Content-Length of a streamed response; more body than this is never written.
    var declaredLength: Int?
    /// Whether the handler offered more body than `declaredLength` (the rest was dropped and the
    /// connection closes after the response).
    public internal(set) var bodyOverran = false
    var isHead: Bool

    init(head: HTTPRequestHead, peer: String, listener: Int, startedAt: NanoTime, loop: EventLoop, connection: HTTPConnection) {
        self.head = head
        self.peer = peer
        self.listener = listener
        self.startedAt = startedAt
        self.loop = loop
        self.connection = connection
        isHead = head.methodIs("HEAD")
    }

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
        startResponse(status: status, framing: framing) { bytes in
            for (name, value) in headers { HTTPConnection.appendField(name, value, into: &bytes) }
        }
    }

    /// Starts a streamed response whose fields `writeFields` appends as `Name: value\r\n` lines
    /// (the caller vouches they hold no CR, LF or NUL); framing fields are added after them.
    public func startResponse(status: Int, framing: ResponseFraming, writeFields: (inout [UInt8]) -> Void) {
        guard let connection, !responseStarted else { return }
        connection.startResponse(self, status: status, framing: framing, writeFields: writeFields)
    }

    /// Queues body bytes of a streamed response.
    public func writeBody(_ bytes: UnsafeRawBufferPointer) {
        guard let connection, responseStarted, !responseEnded else { return }
        connection.writeBody(self, bytes)
    }

    /// Ends a streamed response.
    public func endResponse() {
        guard let connection, responseStarted, !responseEnded else { return }
        connection.endResponse(self)
    }

    /// Closes the client connection: a streamed response cannot be finished. What was queued is
    /// flushed first, so the client gets the head and partial body before the close.
    public func abort(reason: String) { connection?.abort(reason: reason) }

    /// Takes back a started response of which nothing reached the client yet (true), so an error
    /// response can replace it; false when bytes already left.
    public func retractResponse() -> Bool { connection?.retract(self) ?? false }

    /// Whether more output may be queued without exceeding the high-water mark.
    public var canWrite: Bool { connection?.canWrite ?? false }

    /// Stops delivering request body until `resumeBody` (the socket is not read meanwhile).
    public func pauseBody() { connection?.bodyPaused = true }

    /// Resumes request body delivery.
    public func resumeBody() { connection?.resumeBody() }
}
