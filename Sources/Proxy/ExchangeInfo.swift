import EventLoop

/// What the proxy keeps with one exchange for its log line.
final class ExchangeInfo {
    let requestID: String
    let path: Substring
    var route: String?
    var upstream: String?
    /// The forwarding of this exchange, kept alive until the response ends.
    var forwarded: ForwardedExchange?

    init(requestID: String, path: Substring) {
        self.requestID = requestID
        self.path = path
    }
}

extension HTTPExchange {
    var info: ExchangeInfo? { context as? ExchangeInfo }
}
