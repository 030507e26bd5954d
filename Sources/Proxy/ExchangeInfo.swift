import Config
import EventLoop

/// What the proxy keeps with one exchange for its log line.
final class ExchangeInfo {
    let requestID: String
    let path: Substring
    var route: String?
    /// The provider whose tokens the route carries, for the log line.
    var provider: String?
    /// The upstream URL of the latest hop.
    var upstreamURL: UpstreamURL?
    /// `origin + path` of that hop, for logs (never the query: it may carry secrets).
    var upstream: String? { upstreamURL.map { $0.origin + $0.path } }
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
