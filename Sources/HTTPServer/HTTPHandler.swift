import EventLoop
import HTTP1

/// What the server calls for each request, on the loop thread that owns the connection.
public protocol HTTPHandler: AnyObject {
    /// A request head arrived; answer now or later through `exchange`, and set its `delegate`
    /// to receive the request body and the exchange's events.
    func handle(_ exchange: HTTPExchange)
    /// The exchange ended (completed, refused, or its connection went away); called once per
    /// exchange, after its delegate heard the same outcome.
    func finished(_ exchange: HTTPExchange, outcome: ExchangeOutcome)
    /// The server refuses to go on (a malformed or too large request, too many connections): the
    /// whole response to write before it closes, rendered by the handler. `exchange` is the
    /// exchange when a head had been parsed (its outcome follows through `finished`); nil for
    /// bytes that never became a request or a connection refused at accept.
    func refusal(_ refusal: HTTPRefusal, exchange: HTTPExchange?, peer: String) -> [UInt8]
    /// The server is stopping: end responses that would otherwise never end (event streams).
    func shutdown()
}

/// Receives the events of one exchange, on its loop; set as `HTTPExchange.delegate`, which is
/// its single owner until `exchange(_:finished:)`.
public protocol HTTPExchangeDelegate: AnyObject {
    /// A piece of the request body (valid only during the call). Not delivered once the
    /// response ended (the rest of the body is drained).
    func exchange(_ exchange: HTTPExchange, receivedBody bytes: UnsafeRawBufferPointer)
    /// The request body is complete (at once, after `handle`, for a bodiless request).
    func exchangeBodyEnded(_ exchange: HTTPExchange)
    /// Output drained below the low-water mark after `canWrite` was false.
    func exchangeWritable(_ exchange: HTTPExchange)
    /// The exchange ended; the last event. Anything but `.completed`/`.truncated` means the
    /// response will never end: stop the work behind it.
    func exchange(_ exchange: HTTPExchange, finished outcome: ExchangeOutcome)
}

extension HTTPExchangeDelegate {
    public func exchange(_ exchange: HTTPExchange, receivedBody bytes: UnsafeRawBufferPointer) {}
    public func exchangeBodyEnded(_ exchange: HTTPExchange) {}
    public func exchangeWritable(_ exchange: HTTPExchange) {}
    public func exchange(_ exchange: HTTPExchange, finished outcome: ExchangeOutcome) {}
}

/// Why the server refuses a request or a connection; the handler renders the response.
public struct HTTPRefusal: Sendable, Equatable {
    /// The response status.
    public let status: Int
    /// The stable error code (`body_too_large`, `too_many_connections`, a parse error's code).
    public let code: String
    /// A sentence for the client.
    public let message: String
    /// What is logged (a parse error's precise reason; else the code).
    public let reason: String

    /// A refusal with these parts.
    public init(status: Int, code: String, message: String, reason: String? = nil) {
        self.status = status
        self.code = code
        self.message = message
        self.reason = reason ?? code
    }

    /// A request the parser or body decoder refused.
    public init(_ error: HTTPParseError) {
        self.init(status: error.status, code: error.errorCode, message: error.message, reason: error.reason)
    }

    /// The declared or received body exceeds `maxBodyBytes`.
    public static let bodyTooLarge = HTTPRefusal(
        status: 413, code: "body_too_large",
        message: "The request body is larger than the proxy accepts.")
    /// The connection limit is reached; the connection is closed after this answer.
    public static let tooManyConnections = HTTPRefusal(
        status: 503, code: "too_many_connections",
        message: "The proxy has too many open connections.")
    /// Whether this is the connection-limit refusal.
    public var isConnectionLimit: Bool { code == "too_many_connections" }
}
