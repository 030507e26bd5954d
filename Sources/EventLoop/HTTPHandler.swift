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

/// Request IDs unique across the process: a random per-process prefix plus a per-loop counter.
public struct RequestIDGenerator {
    private let prefix: String
    private var counter: UInt64 = 0

    /// Creates a generator for loop `index`.
    public init(loopIndex: Int) {
        var random: UInt64 = 0
        withUnsafeMutableBytes(of: &random) { raw in
            var g = SystemRandomNumberGenerator()
            raw.storeBytes(of: g.next(), as: UInt64.self)
        }
        prefix = String(random & 0xFFFF_FFFF_FFFF, radix: 16) + "-" + String(loopIndex, radix: 16) + "-"
    }

    /// The next ID, e.g. `9f2c4e1a0b3d-0-1a`.
    public mutating func next() -> String {
        counter &+= 1
        return prefix + String(counter, radix: 16)
    }
}
