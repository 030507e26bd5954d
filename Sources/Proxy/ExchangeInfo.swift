import Config
import EventLoop
import HTTPServer

/// What the proxy keeps with one exchange for its log line. It is the exchange's delegate
/// (`HTTPExchange.delegate`, its single owner) from `ProxyHandler.handle` on, until a
/// `ForwardedExchange`, which keeps this record, takes over when the request is forwarded.
final class ExchangeInfo: HTTPExchangeDelegate {
    let requestID: String
    let path: Substring
    /// The route's slot on this loop, once the request was routed: the log line's route, its
    /// counters and provider are read from it, not copied into the record per request.
    var slot: RouteSlot?
    /// What the request is logged under when no route slot answers for it (a probe, `_platform`,
    /// a route's request refused by its guards).
    private var namedRoute: String?
    /// The route (or `_platform`, a probe's) the request is logged under, nil while unrouted.
    var route: String? {
        get { slot?.route.config.name ?? namedRoute }
        set { namedRoute = newValue }
    }
    /// The counters of that route on this loop, when the request was routed (else they are
    /// found by the name).
    var counters: RouteCounters? { slot?.counters }
    /// The provider whose tokens the route carries, for the log line.
    var provider: String? { slot?.route.provider }
    /// For answers that wait for the request body (control endpoints, mock replays): run once it ended.
    var afterBody: (() -> Void)?
    /// The body collected for `afterBody`, when the endpoint reads one.
    var collected: CollectedBody?
    /// For a streamed answer (the auth event stream): run when its queued output drains.
    var onWritable: (() -> Void)?

    init(requestID: String, path: Substring) {
        self.requestID = requestID
        self.path = path
    }

    func exchange(_ exchange: HTTPExchange, receivedBody bytes: UnsafeRawBufferPointer) {
        collected?.append(bytes)
    }

    func exchangeBodyEnded(_ exchange: HTTPExchange) {
        let action = afterBody
        afterBody = nil
        action?()
    }

    func exchangeWritable(_ exchange: HTTPExchange) { onWritable?() }

    func exchange(_ exchange: HTTPExchange, finished outcome: ExchangeOutcome) {
        afterBody = nil
        collected = nil
        onWritable = nil
    }
}

/// A request body read whole by a control endpoint, up to a limit.
final class CollectedBody {
    let limit: Int
    private(set) var bytes: [UInt8] = []
    /// Set once more than `limit` bytes arrived (the endpoint answers 413).
    private(set) var tooLarge = false

    init(limit: Int) { self.limit = limit }

    func append(_ part: UnsafeRawBufferPointer) {
        if bytes.count + part.count > limit { tooLarge = true } else { bytes.append(contentsOf: part) }
    }
}

extension HTTPExchange {
    /// The proxy's record of this exchange, kept by its delegate.
    var info: ExchangeInfo? {
        switch delegate {
        case let forwarded as ForwardedExchange: forwarded.info
        case let info as ExchangeInfo: info
        case let tunnel as Tunnel: tunnel.info
        default: nil
        }
    }

    /// `origin + path` of the latest hop upstream, for logs (never the query: it may carry
    /// secrets); nil for a request that was not forwarded. Read from the forwarding delegate
    /// rather than copied into the log record per hop.
    var upstream: String? { upstreamURL.map { $0.origin + $0.path } }

    /// The URL of the latest hop upstream; nil for a request that was not forwarded.
    var upstreamURL: UpstreamURL? { (delegate as? ForwardedExchange)?.url }

    /// Runs `action` once the request body has ended (at once after `handle` for a bodiless request).
    func afterBody(_ action: @escaping () -> Void) { info?.afterBody = action }
}
