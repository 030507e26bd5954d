import Config
import EventLoop
import HTTPServer
import Upstream

/// What the proxy keeps with one exchange, passed by type wherever the exchange goes: its
/// request ID and path, the route it is logged under, and what a control endpoint waits for.
/// `ProxyHandler.handle` makes it and sets it as the exchange's delegate (the exchange owns it);
/// a `ForwardedExchange`, which keeps this context, takes over as the delegate when the request
/// is forwarded. Whichever delegate hears the exchange finish hands this context to the handler
/// for the access log line.
final class ExchangeContext: ProxyExchangeDelegate {
    /// The exchange. Held strongly: the exchange owns its delegate until it finished, so the
    /// cycle ends there.
    let exchange: HTTPExchange
    let requestID: String
    let path: Substring
    /// The loop's handler, kept alive by the server and by `ProxyService` for the life of the
    /// process: no reference count per request.
    private let proxy: Unretained<ProxyHandler>
    /// The route's slot on this loop, once the request was routed: the log line's route, its
    /// counters and provider are read from it, not copied into the context per request.
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
    /// For answers that wait for the request body (control endpoints, mock replays): run once it
    /// ended (at once after `handle` for a bodiless request).
    var afterBody: (() -> Void)?
    /// The body collected for `afterBody`, when the endpoint reads one.
    var collected: CollectedBody?
    /// For a streamed answer (the auth event stream): run when its queued output drains.
    var onWritable: (() -> Void)?

    /// Itself: the context before the request is forwarded.
    var context: ExchangeContext { self }

    init(_ exchange: HTTPExchange, requestID: String, path: Substring, handler: ProxyHandler) {
        self.exchange = exchange
        self.requestID = requestID
        self.path = path
        proxy = Unretained(handler)
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
        proxy.object.exchangeFinished(self, outcome: outcome, forwarded: nil)
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

/// An exchange delegate of the proxy's: the context, or the forwarding that keeps it. Only the
/// server's refusal callback, which names the exchange alone, looks a context up through it.
protocol ProxyExchangeDelegate: HTTPExchangeDelegate {
    var context: ExchangeContext { get }
}
