/// What the server calls for each request, on the loop thread that owns the connection.
public protocol HTTPHandler: AnyObject {
    /// A request head arrived; answer now or later through `exchange`.
    func handle(_ exchange: HTTPExchange)
    /// The response to `exchange` was fully queued.
    func completed(_ exchange: HTTPExchange)
    /// The connection closed before the response ended.
    func aborted(_ exchange: HTTPExchange, reason: String)
    /// The server answered `exchange` itself with an error (body too large or malformed) and will close.
    func refused(_ exchange: HTTPExchange, status: Int, code: String)
    /// The server refused bytes that never became a request (malformed head).
    func protocolError(_ error: String, status: Int, peer: String, requestID: String)
    /// The server is stopping: end responses that would otherwise never end (event streams).
    func shutdown()
}
