import Config
import Credentials
import EventLoop
import HTTP1
import Upstream

/// One client request forwarded upstream: the request streams to curl, the response streams
/// back, redirects are followed hop by hop with credentials re-decided per hop.
final class ForwardedExchange: UpstreamTransferDelegate {
    private let exchange: HTTPExchange
    private let route: RouteConfiguration
    private let injector: CredentialInjector
    private unowned let handler: ProxyHandler
    private let requestID: String
    /// Client headers minus hop-by-hop and credential fields, plus the forwarding fields.
    private let baseLines: HeaderLines
    /// The injected `Name: <type> <token>` lines (empty on `none` routes).
    private var credentialLines: HeaderLines
    /// The token generation those lines came from.
    private var generation: UInt64
    /// Whether the one retry after a 401 was used.
    private var retried = false
    /// The upstream said 401 and a refresh-and-retry follows once the transfer ends.
    private var retryPending = false
    private var body: RequestBody?
    private var url: UpstreamURL
    private var method: String
    private var hops = 0
    /// Set once a hop went to a host outside the credential hosts: the rest of the chain stays
    /// uncredentialed, or a foreign host could choose path, method and body of a credentialed request.
    private var leftCredentialHosts = false
    private var transfer: UpstreamTransfer?
    private var pendingRedirect: RedirectPolicy.Decision?
    /// Set on a route in record mode.
    var recorder: MockRecorder?
    /// The injected token, when echoes of it are masked (credentialed route, switch on).
    var echoToken: [UInt8]?
    /// Masks the token in the response being relayed.
    private var masker: EchoMasker?

    init(exchange: HTTPExchange, route: RouteConfiguration, upstream: UpstreamURL, handler: ProxyHandler,
         requestID: String, credentialLines: HeaderLines, generation: UInt64, injector: CredentialInjector,
         experimentLines: HeaderLines? = nil) {
        self.generation = generation
        self.exchange = exchange
        self.route = route
        self.handler = handler
        self.requestID = requestID
        self.injector = injector
        self.credentialLines = credentialLines
        url = upstream
        method = exchange.head.method
        var removing = route.credential == .none ? [] : injector.headerNames.map { Array($0.utf8) }
        // A route that carries assignments replaces the client's X-Experiments, never merges with it.
        if experimentLines != nil { removing.append(Array("x-experiments".utf8)) }
        var lines = HeaderPolicy.upstreamLines(exchange.head, peer: exchange.peer, requestID: requestID, removing: removing)
        if let experimentLines { lines.append(contentsOf: experimentLines) }
        baseLines = lines
    }

    /// Wires the client body into a `RequestBody` and sends the first hop.
    func start(retryBodyBytes: Int) {
        let head = exchange.head
        // The exchange keeps this object alive (ExchangeInfo.forwarded) until its response ends;
        // the hooks hold it weakly so no cycle outlives the exchange.
        exchange.info?.forwarded = self
        if head.framing != .none {
            let body = RequestBody(replayLimit: retryBodyBytes)
            exchange.onBody = { [weak self] bytes in self?.clientSent(bytes) }
            exchange.onEnd = { [weak self] in self?.body?.finish() }
            body.onDrained = { [weak exchange] in
                // Called from inside a libcurl callback: resume the client after this event.
                exchange?.loop.afterEvents { [weak exchange] in exchange?.resumeBody() }
            }
            self.body = body
        }
        // A client that goes away cancels the transfer through `ProxyHandler.aborted`, and
        // `onWritable` is set only when the client falls behind: no closures per request.
        send(lines: baseLines, credentials: credentialLines)
        // The body may have been held while credentials were awaited.
        exchange.resumeBody()
    }

    /// Stops the upstream side (the client went away, or the server refused the rest of the request).
    func cancel() {
        transfer?.cancel()
        transfer = nil
    }

    private func clientSent(_ bytes: UnsafeRawBufferPointer) {
        guard let body else { return }
        body.append(bytes)
        if body.buffered > RequestBody.highWater { exchange.pauseBody() }
    }

    private func send(lines: HeaderLines, credentials: HeaderLines) {
        var length: Int?
        if case .length(let n) = exchange.head.framing { length = n }
        if let body, body.ended { length = body.totalBytes }
        exchange.info?.upstreamURL = url
        var request = UpstreamRequest(method: method, url: url.description, headers: lines, hasBody: body != nil,
                                      bodyLength: length, timeout: route.timeoutSeconds)
        request.extraHeaders = credentials
        transfer = handler.upstream.start(request, body: body, delegate: self)
    }

    // MARK: transfer events

    func transfer(_ transfer: UpstreamTransfer, receivedHead head: UpstreamResponseHead) {
        if head.status == 401 && mayRetryAfter401 && !refreshTooSoon() {
            retryPending = true
            return
        }
        if head.status >= 300 && head.status < 400 {
            let decision = RedirectPolicy.decide(
                status: head.status, location: head.first("Location"), method: method, hasBody: body != nil,
                bodyReplayable: body?.isReplayable ?? false, current: url, follow: route.redirects.follow,
                max: route.redirects.max, hops: hops,
                trusted: { [injector, url, route] in
                    route.redirects.crossHostMethods == .all || injector.mayCarryCredentials(from: url, to: $0)
                })
            if decision != .relay {
                pendingRedirect = decision
                return
            }
        }
        let framing: HTTPExchange.ResponseFraming
        let length = head.contentLength
        if head.status == 204 || head.status == 304 || (exchange.isHeadRequest && length == nil) {
            framing = .bodiless
        } else if let length {
            framing = .length(length)
        } else {
            framing = .streamed
        }
        recorder?.responseStarted(status: head.status)
        masker = echoToken.flatMap { EchoMasker(token: $0) }
        exchange.startResponse(status: head.status, framing: framing) { bytes in
            HeaderPolicy.appendResponseFields(head, requestID: requestID, to: &bytes, masker: &masker)
        }
    }

    func transfer(_ transfer: UpstreamTransfer, receivedBody bytes: UnsafeRawBufferPointer) -> Bool {
        guard pendingRedirect == nil && !retryPending else { return true }  // a body that will not be relayed
        guard exchange.canWrite else {
            if exchange.onWritable == nil {
                exchange.onWritable = { [weak self] in self?.transfer?.resumeResponse() }
            }
            return false
        }
        if masker != nil {
            masker!.process(bytes) { part in
                recorder?.append(part)
                exchange.writeBody(part)
            }
        } else {
            recorder?.append(bytes)
            exchange.writeBody(bytes)
        }
        return true
    }

    func transfer(_ transfer: UpstreamTransfer, completedWith error: UpstreamError?) {
        self.transfer = nil
        if let error {
            if error.isCancelled { return }
            handler.upstreamFailed(exchange, error: error)
            // A response none of whose bytes left yet is replaced by the error; one already partly
            // sent is cut short after what was queued (the client sees the truncation).
            if exchange.responseStarted && !exchange.retractResponse() {
                return exchange.abort(reason: "upstream_failed_mid_response")
            }
            return handler.fail(exchange, error.isTimeout ? .upstreamTimeout : .upstreamUnreachable)
        }
        if retryPending { return retryAfter401() }
        guard let redirect = pendingRedirect else {
            finishMasking()
            if let recorded = recorder?.finish() { handler.mockRecorded(exchange, file: recorded.file, error: recorded.error) }
            return exchange.endResponse()
        }
        pendingRedirect = nil
        switch redirect {
        case .relay:
            finishMasking()
            exchange.endResponse()
        case .tooManyRedirects:
            handler.fail(exchange, .tooManyRedirects)
        case .follow(let target, let nextMethod, let keepsBody):
            follow(to: target, method: nextMethod, keepsBody: keepsBody)
        }
    }

    /// Writes what the masker held back and counts its masks.
    private func finishMasking() {
        guard masker != nil else { return }
        masker!.finish { part in
            recorder?.append(part)
            exchange.writeBody(part)
        }
        if masker!.masked > 0 { handler.metrics.echoMasked(route: route.name, count: masker!.masked) }
        masker = nil
    }

    /// README "Logging in (OAuth 2 / OIDC)": on a `retryOn401` route, refresh (or take tokens that changed since this request
    /// was sent) and retry once; a body too large to keep is streamed and its 401 relayed.
    private var mayRetryAfter401: Bool {
        route.retryOn401 && !retried && route.credential != .none && handler.manager(for: route) != nil && hops == 0
            && (body == nil || body?.isReplayable == true)
    }

    /// Whether the tokens this request carried are the current ones and younger than
    /// `minRefreshIntervalSeconds`: the 401 is then relayed as is (decided here, before its body
    /// is dropped; the lifecycle applies the same rule to 401s that reach it).
    private func refreshTooSoon() -> Bool {
        guard let manager = handler.manager(for: route) else { return false }
        let snapshot = handler.snapshot(for: route)
        guard snapshot.generation == generation,
              CredentialLifecycle.tooYoung(obtainedAt: snapshot.obtainedAt, now: UnixTime.now(),
                                           minRefreshInterval: manager.minRefreshInterval) else { return false }
        manager.refreshOutcomes.suppressed.add(1, ordering: .relaxed)
        return true
    }

    private func retryAfter401() {
        retryPending = false
        retried = true
        guard let manager = handler.manager(for: route) else { return handler.fail(exchange, handler.awaitingAuthorization(for: route)) }
        manager.refresh(seen: generation, after401: true, replyOn: exchange.loop) { [self] outcome in
            guard !exchange.isAborted else { return }
            switch outcome {
            case .unavailable(let reason):
                handler.fail(exchange, .authServerUnavailable(reason))
            case .notLoggedIn:
                handler.fail(exchange, handler.awaitingAuthorization(for: route))
            case .suppressed:
                // The 401 was dropped for the retry: send once more as is and relay what comes.
                body = body?.replay()
                send(lines: baseLines, credentials: credentialLines)
            case .ready:
                let snapshot = handler.snapshot(for: route)
                guard let lines = injector.lines(snapshot, names: route.headers) else {
                    return handler.fail(exchange, .credentialsUnavailable(route.credential.rawValue))
                }
                credentialLines = lines
                generation = snapshot.generation
                if echoToken != nil { echoToken = snapshot.tokenBytes(for: route.credential) }
                body = body?.replay()
                handler.metrics.retriedAfter401(route: route.name)
                send(lines: baseLines, credentials: credentialLines)
            }
        }
    }

    private func follow(to target: UpstreamURL, method nextMethod: String, keepsBody: Bool) {
        hops += 1
        let credentials = !leftCredentialHosts && injector.mayCarryCredentials(from: url, to: target)
        if !credentials { leftCredentialHosts = true }
        url = target
        method = nextMethod
        if keepsBody {
            body = body?.replay()
        } else {
            // The client may still be sending: let the connection drain it.
            exchange.onBody = nil
            exchange.resumeBody()
            body = nil
        }
        if credentials {
            send(lines: baseLines, credentials: credentialLines)
        } else {
            handler.credentialsStripped(route: route.name)
            send(lines: baseLines.removing(Set(injector.strippedOnForeignHosts)), credentials: HeaderLines())
        }
    }
}

extension HTTPExchange {
    /// Whether the request is a HEAD (the response carries no body).
    var isHeadRequest: Bool { head.methodIs("HEAD") }
}
