import Config
import EventLoop
import Glibc
import HTTP1
import HTTPServer
import Upstream

/// What the handler counts and logs: the access log line of every exchange, the server's own
/// refusals, and what a forwarded exchange reports on the way.
extension ProxyHandler {

    /// An exchange ended: its access log line was written by `exchangeFinished`, which its
    /// delegate (the context, or the forwarding that keeps it) calls just before this.
    public func finished(_ exchange: HTTPExchange, outcome: ExchangeOutcome) {
        if !eventStreams.isEmpty { eventStreams.removeAll { $0.exchange === exchange } }
    }

    /// Counts and logs a finished exchange; `forwarded` is its forwarding when it was forwarded (the
    /// log line names its latest hop; the URL is read only when a line is written: a copy retains
    /// each of its parts).
    func exchangeFinished(_ context: ExchangeContext, outcome: ExchangeOutcome, forwarded: ForwardedExchange?) {
        switch outcome.ending {
        case .completed: logExchange(context, outcome, forwarded, level: .info, reason: nil)
        case .truncated:
            logExchange(
                context, outcome, forwarded, level: .warning, reason: "upstream_body_longer_than_content_length")
        case .clientClosed(let reason), .aborted(let reason):
            logExchange(context, outcome, forwarded, level: .info, reason: reason)
        case .refused(let reason): logExchange(context, outcome, forwarded, level: .warning, reason: reason)
        }
    }

    /// The server's own refusals, rendered as the proxy's JSON errors (`Connection: close`).
    public func refusal(_ refusal: HTTPRefusal, exchange: HTTPExchange?, peer: String) -> [UInt8] {
        var context: ExchangeContext?
        if let exchange {
            // The server names only the exchange: its context is found from its delegate here,
            // on this rare path alone.
            context = (exchange.delegate as? any ProxyExchangeDelegate)?.context
            if context == nil {
                // Refused before `handle` saw it (a Content-Length over the limit): the access log
                // line gets the ID the client is sent, and the path.
                let made = ExchangeContext(
                    exchange, requestID: requestID(exchange.head),
                    path: RequestTarget(exchange.head.target).path, handler: self)
                exchange.delegate = made
                context = made
            }
        }
        let requestID = context?.requestID ?? requestIDs.next()
        let body = Array(
            "{\"error\":\"\(refusal.code)\",\"message\":\"\(refusal.message)\",\"requestID\":\"\(requestID)\"}".utf8)
        let head = HTTPResponseHead(
            status: refusal.status,
            headers: [
                ("Content-Type", "application/json"), ("Content-Length", String(body.count)),
                ("X-Request-ID", requestID), ("Connection", "close"),
            ])
        var bytes: [UInt8] = []
        head.serialize(into: &bytes)
        bytes.append(contentsOf: body)
        if exchange == nil {
            if refusal.isConnectionLimit {
                Log.emit(
                    .warning, "connection_refused",
                    [
                        "reason": .string("max_connections"), "peer": .string(peer),
                        "requestID": .string(requestID),
                    ])
            } else {
                // Bytes that never became a request.
                metrics.request(route: "_unrouted", status: refusal.status, seconds: 0)
                log.emit(
                    .warning, "bad_request",
                    [
                        ("requestID", .string(requestID)), ("status", .int(refusal.status)),
                        ("reason", .string(refusal.reason)), ("peer", .string(peer)),
                    ])
            }
        }
        return bytes
    }

    /// The path as logged: a journey step id is a bearer capability for that step, so it is
    /// never written to the access log.
    static func loggedPath(_ path: Substring) -> Substring {
        let steps: StaticString = "/_platform/login/journey/"
        let masked = path.withUTF8Bytes { bytes in
            bytes.count > steps.utf8CodeUnitCount
                && memcmp(bytes.baseAddress!, steps.utf8Start, steps.utf8CodeUnitCount) == 0
        }
        return masked ? "/_platform/login/journey/<step>" : path
    }

    private func logExchange(
        _ info: ExchangeContext, _ result: ExchangeOutcome, _ forwarded: ForwardedExchange?, level: LogLevel,
        reason outcome: String?
    ) {
        let exchange = info.exchange
        let seconds = loop.now.seconds(since: exchange.startedAt)
        // nginx's 499: the client went away before any response was sent.
        var status = result.status
        if status == 0, case .clientClosed = result.ending { status = 499 }
        var level = level
        // A routed request has its route's counters; only the others are told apart by name.
        if let counters = info.counters {
            counters.request(status: status, seconds: seconds)
        } else if info.route == Probe.route {
            // Probes and scrapes arrive every few seconds for the life of the process: not traffic.
            if level == .info { level = .debug }
        } else {
            metrics.request(route: info.route ?? "_unrouted", status: status, seconds: seconds)
        }
        recordForConsole(info, forwarded, status: status, seconds: seconds)
        guard level > .info || runtime.configuration.accessLog else { return }
        // Written straight into the loop's log buffer: no array of fields, no String per value.
        let micros = Int((seconds * 1e6).rounded())
        log.emit(level, "request") { line in
            line.field("requestID", info.requestID)
            exchange.head.storage.withUnsafeBufferPointer {
                line.field("method", bytes: UnsafeBufferPointer(rebasing: $0[exchange.head.methodRange]))
            }
            line.field("path", Self.loggedPath(info.path))
            line.field("route", info.route ?? "")
            line.field("status", status)
            line.field("durationMs", thousandths: micros)
            line.field("bytesIn", result.bytesIn)
            line.field("bytesOut", result.bytesOut)
            line.field("peer", exchange.peer)
            if let provider = info.provider { line.field("provider", provider) }
            if let upstream = forwarded?.url { line.field("upstream", joining: upstream.origin, upstream.path) }
            if let outcome { line.field("outcome", outcome) }
        }
    }

    /// A record-mode response was written (or could not be: logged, never fatal).
    func mockRecorded(_ context: ExchangeContext, file: String, error: String?) {
        if let error {
            log.emit(
                .warning, "mock_record_failed",
                [
                    ("requestID", .string(context.requestID)),
                    ("file", .string(file)), ("error", .string(error)),
                ])
        } else {
            metrics.mockRecorded(route: context.route ?? "")
            log.emit(.info, "mock_recorded", [("requestID", .string(context.requestID)), ("file", .string(file))])
        }
    }

    /// An upstream transfer failed; logged with libcurl's reason (which never holds headers).
    func upstreamFailed(_ context: ExchangeContext, upstream: UpstreamURL, error: UpstreamError) {
        logUpstream(
            context, upstream, error, level: .warning, event: "upstream_failed",
            kind: error.isTimeout ? "timeout" : "unreachable")
    }

    /// A hop's pooled upstream connection turned out closed before anything came back, and the
    /// hop is sent once more (`ForwardStateMachine.transferCompleted`).
    func upstreamResent(_ context: ExchangeContext, upstream: UpstreamURL, error: UpstreamError) {
        logUpstream(context, upstream, error, level: .info, event: "upstream_resent", kind: "stale_connection")
    }

    private func logUpstream(
        _ context: ExchangeContext, _ upstream: UpstreamURL, _ error: UpstreamError, level: LogLevel,
        event: String, kind: String
    ) {
        // `origin + path`, never the query: it may carry secrets.
        log.emit(
            level, event,
            [
                ("requestID", .string(context.requestID)), ("route", .string(context.route ?? "")),
                ("upstream", .string(upstream.origin + upstream.path)), ("error", .string(error.description)),
            ])
        metrics.upstreamError(route: context.route ?? "", kind: kind)
    }

    /// A redirect left the credential hosts: injected headers, cookies and Authorization were dropped.
    func credentialsStripped(route: String) { metrics.stripped(route: route) }
}
