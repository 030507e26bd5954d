import Config
import Credentials
import EventLoop
import HTTP1
import HTTPServer
import Upstream

/// One client request forwarded upstream: the request streams to curl, the response streams
/// back, redirects are followed hop by hop with credentials re-decided per hop. It is the
/// exchange's delegate (owned by the exchange until it finished) and keeps its context.
final class ForwardedExchange: UpstreamTransferDelegate, ProxyExchangeDelegate {
    private let exchange: HTTPExchange
    /// The route's slot on this loop, which holds the route.
    private let slot: RouteSlot
    /// The matched route, kept alive by `slot`: it is shared by every loop, so it is referred to
    /// without a reference count of its own (a count moved per request would move between the
    /// loops' CPU caches; `bench/shared-writes.sh` finds such writes).
    private let compiled: Unretained<CompiledRoute>
    /// The matched route; its settings are `route.config`.
    private var route: CompiledRoute { compiled.object }
    private var injector: CredentialInjector { route.injector }
    /// The loop's handler, kept alive by the server and by `ProxyService` for the life of the
    /// process (a reload replaces its runtime, never the handler): no count per request.
    private let proxy: Unretained<ProxyHandler>
    private var handler: ProxyHandler { proxy.object }
    /// The exchange's context (request ID, route); the upstream its log line names is `url`.
    let context: ExchangeContext
    private var requestID: String { context.requestID }
    /// What the first hop sends, made once: the method and URL, the client's headers minus
    /// hop-by-hop and credential fields plus the forwarding fields (`headers`; `supplies` says
    /// whether they hold an `Accept` and a `Content-Type`, nil when unknown), the injected
    /// `Name: <type> <token>` lines (`extraHeaders`, empty on `none` routes; `extraSupplies`
    /// likewise) and the body's framing. A `let`, so a hop lends it to the client in place; a
    /// stored `var` is copied for the call, which retains and releases each of its strings and
    /// line arrays.
    private let request: UpstreamRequest
    /// What a redirect or a refreshed token made of `request` for the hops after it; nil while
    /// `request` stands.
    private var revised: UpstreamRequest?
    /// The token generation the injected lines came from.
    private var generation: UInt64
    /// The lifecycle: which hop, retry or redirect is under way, and how the exchange ended.
    private var machine: ForwardStateMachine
    private var body: RequestBody?
    /// The URL of the latest hop (the request's `target` is the same URL, as its parts).
    private(set) var url: UpstreamURL
    /// The method of the latest hop.
    private var method: String { revised?.method ?? request.method }
    /// The handle of the hop under way, for `cancel` and `resumeResponse`; whether one is under
    /// way is the machine's state.
    private var transfer: UpstreamTransfer?
    /// Set on a route in record mode.
    var recorder: MockRecorder?
    /// Whether echoes of the injected token are masked (credentialed route, switch on).
    var masksEchoes = false
    /// A masker for the injected token, set only when echoes are masked (nil too when the token is
    /// too short to mask); the response copies it.
    var echoMasker: EchoMasker?
    /// Masks the token in the response being relayed.
    private var masker: EchoMasker?
    /// Echoes masked in responses already relayed (the console's request list).
    private var maskedEchoes = 0

    /// What the console's request list shows of this exchange: whether the credential lines went
    /// upstream (and stayed on every hop), the redirects followed and the echoes masked.
    var consoleFacts: (credentials: CredentialNote, hops: Int, masked: Int) {
        let note: CredentialNote =
            request.extraHeaders.isEmpty
            ? .noProvider
            : machine.credentials == .stripped ? .stripped : .injected
        return (note, machine.hops, maskedEchoes + (masker?.masked ?? 0))
    }

    /// `identity`: the response is masked or recorded, so it is asked for whole and in its identity
    /// form (docs/security.md, "Echoed credentials"): the client's `Accept-Encoding` and ranges
    /// stay behind, libcurl asks for identity and decodes what comes encoded all the same.
    init(
        context: ExchangeContext, slot: RouteSlot, upstream: UpstreamURL, handler: ProxyHandler,
        credentials: InjectedLines, generation: UInt64,
        experimentLines: HeaderLines? = nil, identity: Bool = false
    ) {
        // The lines first, from the parameters: read after they were stored, the fields passed
        // were retained and released around the call.
        let exchange = context.exchange
        var supplies: SuppliedFields?
        var lines = slot.upstreamLines(
            exchange.head, peer: exchange.peer, requestID: context.requestID,
            removing: RouteSlot.RemovedFields(experiments: experimentLines != nil, identity: identity),
            supplies: &supplies)
        if let experimentLines {
            lines.append(contentsOf: experimentLines)
            supplies = nil
        }
        self.generation = generation
        self.exchange = exchange
        self.slot = slot
        compiled = Unretained(slot.route)
        proxy = Unretained(handler)
        self.context = context
        url = upstream
        let framing = exchange.head.framing
        machine = ForwardStateMachine(hasBody: framing != .none)
        // The first hop's body framing: `start` makes a body exactly when the head frames one,
        // and none of it has arrived yet (`send` checks).
        var length: Int?
        if case .length(let n) = framing { length = n }
        var request = UpstreamRequest(
            method: exchange.head.method,
            target: RequestURL(origin: upstream.origin, path: upstream.path, query: upstream.query),
            headers: lines, supplies: supplies, extraHeaders: credentials.lines,
            extraSupplies: credentials.supplies, hasBody: framing != .none, bodyLength: length,
            timeout: slot.route.config.timeoutSeconds,
            sendsOnce: framing != .none || !exchange.head.methodIsIdempotent, refusesOwnListeners: true)
        request.decodesContent = identity
        request.streamIdleTimeout = slot.route.config.streamIdleTimeoutSeconds
        request.eventStreamIdleTimeout = RouteConfiguration.defaultStreamIdleTimeout
        request.tls = slot.route.tls
        self.request = request
    }

    /// Whether a hop goes out at most once: unless it is bodiless and idempotent, as libcurl would
    /// send any request again after a reused connection died unanswered (docs/forwarding.md, "A pooled
    /// upstream connection closed while idle"). (Every hop also refuses the proxy's own listeners, `refusesOwnListeners`:
    /// a redirect there would come back credentialed by a route.)
    private static func sendsOnce(method: String, hasBody: Bool) -> Bool {
        hasBody || !HTTPRequestHead.isIdempotent(method)
    }

    /// Wires the client body into a `RequestBody` and sends the first hop.
    func start(retryBodyBytes: Int) {
        let head = exchange.head
        // The exchange owns its delegate until it finished: no cycle outlives the exchange.
        exchange.delegate = self
        if head.framing != .none {
            let body = RequestBody(replayLimit: retryBodyBytes)
            body.onDrained = { [weak exchange] in
                // Called from inside a libcurl callback: resume the client after this event.
                exchange?.loop.afterEvents { [weak exchange] in exchange?.resumeBody() }
            }
            self.body = body
        }
        // A client that goes away cancels the transfer (`exchange(_:finished:)`); a client that
        // falls behind resumes it (`exchangeWritable`): no closures per request.
        execute(machine.start())
        // The body may have been held while credentials were awaited.
        exchange.resumeBody()
    }

    /// Stops the upstream side (the client went away, or the server refused the rest of the request).
    func cancel() {
        execute(machine.clientGone())
    }

    // MARK: client events (HTTPExchangeDelegate)

    func exchange(_ exchange: HTTPExchange, receivedBody bytes: UnsafeRawBufferPointer) {
        guard let body else { return }  // a redirect dropped the body: the connection drains it
        body.append(bytes)
        if body.buffered > RequestBody.highWater { exchange.pauseBody() }
    }

    func exchangeBodyEnded(_ exchange: HTTPExchange) { body?.finish() }

    func exchangeWritable(_ exchange: HTTPExchange) { transfer?.resumeResponse() }

    func exchange(_ exchange: HTTPExchange, finished outcome: ExchangeOutcome) {
        switch outcome.ending {
        case .completed, .truncated: break
        case .clientClosed, .aborted, .refused: cancel()
        }
        handler.exchangeFinished(context, outcome: outcome, forwarded: self)
    }

    /// Sends a hop: `request`, or what a redirect or a refreshed token made of it, with the
    /// body as it stands (a replayed body has its length once it ended; a redirect may drop it).
    private func send() {
        let length = bodyLength
        if revised == nil && request.hasBody == (body != nil) && request.bodyLength == length {
            // The first hop, as it usually is the only one: lent in place.
            transfer = handler.upstream.start(request, body: body, delegate: self)
        } else {
            send(revised ?? request, length: length)
        }
    }

    /// The length of the body a hop sends, when known: from the head, or once the body ended.
    private var bodyLength: Int? {
        if let body, body.ended { return body.totalBytes }
        if case .length(let n) = exchange.head.framing { return n }
        return nil
    }

    /// Sends `hop` with the body as it stands, `length` long when known.
    private func send(_ hop: UpstreamRequest, length: Int?) {
        var hop = hop
        hop.hasBody = body != nil
        hop.bodyLength = length
        hop.sendsOnce = Self.sendsOnce(method: hop.method, hasBody: hop.hasBody)
        transfer = handler.upstream.start(hop, body: body, delegate: self)
    }

    /// Changes what the hops after this one send.
    private func revise(_ change: (inout UpstreamRequest) -> Void) {
        var next = revised ?? request
        change(&next)
        revised = next
    }

    // MARK: transfer events

    func transferSentRequestBody(_ transfer: UpstreamTransfer) {
        machine.requestSent()
    }

    func transfer(_ transfer: UpstreamTransfer, receivedHead head: UpstreamResponseHead) {
        let action = machine.receivedHead(
            status: head.status,
            retryAfter401: { retryAfter401() },
            redirect: { hops in
                RedirectPolicy.decide(
                    status: head.status, location: head.first("Location"), method: method, hasBody: body != nil,
                    bodyReplayable: body?.isReplayable ?? false, current: url, follow: route.config.redirects.follow,
                    max: route.config.redirects.max, hops: hops,
                    trusted: { [injector, url, route] in
                        RedirectPolicy.trusts(
                            $0, from: url, methods: route.config.redirects.crossHostMethods, injector: injector)
                    })
            })
        guard action == .relay else { return }
        let framing: HTTPExchange.ResponseFraming
        // libcurl decodes an encoded body here: its length and coding are not what the client gets.
        let decoded = request.decodesContent && head.isContentEncoded
        let length = decoded ? nil : head.contentLength
        if head.status == 204 || head.status == 304 || (exchange.isHeadRequest && length == nil) {
            framing = .bodiless
        } else if let length {
            framing = .length(length)
        } else {
            framing = .streamed
        }
        recorder?.responseStarted(status: head.status)
        // Moved, not copied (a copy retains each of its arrays): once a response is relayed, no
        // later hop needs it.
        masker = echoMasker.take()
        exchange.startResponse(status: head.status, framing: framing) { bytes in
            HeaderPolicy.appendResponseFields(
                head, requestID: requestID, to: &bytes, masker: &masker,
                droppingContentEncoding: decoded)
        }
    }

    func transfer(_ transfer: UpstreamTransfer, receivedBody bytes: UnsafeRawBufferPointer) -> Bool {
        guard machine.relaysBody else { return true }  // a body that will not be relayed
        // A refusal is remembered: `exchangeWritable` follows once the client caught up.
        guard exchange.canWrite else { return false }
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
        execute(
            machine.transferCompleted(
                error, carriesCredentials: { injector.mayCarryCredentials(from: url, to: $0) },
                idempotent: { HTTPRequestHead.isIdempotent(method) }))
    }

    // MARK: actions

    private func execute(_ action: ForwardStateMachine.Action) {
        switch action {
        case .none:
            return
        case .send:
            send()
        case .cancelTransfer:
            transfer?.cancel()
            transfer = nil
        case .refreshAfter401:
            refreshAfter401()
        case .resend(let refreshed):
            resend(refreshed: refreshed)
        case .resendHop(let error):
            handler.upstreamResent(context, upstream: url, error: error)
            sendHop(machine.credentials)
        case .follow(let target, let nextMethod, let keepsBody, let credentials):
            follow(to: target, method: nextMethod, keepsBody: keepsBody, credentials: credentials)
        case .endResponse:
            finishMasking()
            if let recorded = recorder?.finish() {
                handler.mockRecorded(context, file: recorded.file, error: recorded.error)
            }
            exchange.endResponse()
        case .fail(let error):
            // The machine knows no providers: its gate answer is made to name the route's.
            handler.fail(
                context, error == .awaitingAuthorization ? handler.awaitingAuthorization(for: route.config) : error)
        case .failUpstream(let error, let answer):
            handler.upstreamFailed(context, upstream: url, error: error)
            handler.fail(context, answer)
        case .retractOrCut(let error, let answer):
            handler.upstreamFailed(context, upstream: url, error: error)
            // A response none of whose bytes left yet is replaced by the error; one already partly
            // sent is cut short after what was queued (the client sees the truncation).
            guard exchange.retractResponse() else { return exchange.abort(reason: "upstream_failed_mid_response") }
            handler.fail(context, answer)
        }
    }

    /// Writes what the masker held back and counts its masks.
    private func finishMasking() {
        guard masker != nil else { return }
        masker!.finish { part in
            recorder?.append(part)
            exchange.writeBody(part)
        }
        if masker!.masked > 0 { handler.metrics.echoMasked(route: route.config.name, count: masker!.masked) }
        maskedEchoes += masker!.masked
        masker = nil
    }

    /// docs/login.md: on a `retryOn401` route (the machine adds: first send
    /// only), refresh (or take tokens that changed since this request was sent) and retry once.
    /// A body that cannot be sent again (too large to keep, or still arriving when the 401 came)
    /// has its 401 relayed, and the refresh is asked all the same: otherwise the next request
    /// would carry the same refused token (uploads would keep failing until some small request
    /// refreshed).
    private func retryAfter401() -> Bool {
        // A token-exchange route's token is its own: a refresh of the provider's would not change it.
        guard route.config.retryOn401, route.config.credential != .none, route.config.tokenExchange == nil,
            let manager = handler.manager(for: route.config),
            !refreshTooSoon()
        else { return false }
        // The token is refused: tunnels that carry it close once it is replaced.
        TunnelTable.tokenRefused(provider: handler.slot(route.config.provider).name, generation: generation)
        if body == nil || body?.isReplayable == true { return true }
        manager.refresh(seen: generation, after401: true, replyOn: exchange.loop) { _ in }
        return false
    }

    /// Whether the tokens this request carried are the current ones and younger than
    /// `minRefreshIntervalSeconds`: the 401 is then relayed as is (decided here, before its body
    /// is dropped; the lifecycle applies the same rule to 401s that reach it).
    private func refreshTooSoon() -> Bool {
        guard let manager = handler.manager(for: route.config) else { return false }
        let snapshot = handler.snapshot(for: route.config)
        guard snapshot.generation == generation,
            CredentialLifecycle.tooYoung(
                obtainedAt: snapshot.obtainedAt, now: UnixTime.now(),
                minRefreshInterval: manager.minRefreshInterval)
        else { return false }
        manager.refreshOutcomes.suppressed.add(1, ordering: .relaxed)
        return true
    }

    private func refreshAfter401() {
        guard let manager = handler.manager(for: route.config) else {
            return execute(machine.couldNotSend(handler.awaitingAuthorization(for: route.config)))
        }
        manager.refresh(seen: generation, after401: true, replyOn: exchange.loop) { [self] outcome in
            execute(exchange.isAborted ? machine.clientGone() : machine.refreshAnswered(outcome))
        }
    }

    private func resend(refreshed: Bool) {
        if refreshed {
            let snapshot = handler.snapshot(for: route.config)
            guard let lines = injector.lines(snapshot, names: route.config.headers) else {
                return execute(machine.couldNotSend(.credentialsUnavailable(route.config.credential.rawValue)))
            }
            revise {
                $0.extraHeaders = lines
                $0.extraSupplies = nil
            }
            generation = snapshot.generation
            if masksEchoes {
                echoMasker = snapshot.tokenBytes(for: route.config.credential).flatMap { EchoMasker(token: $0) }
            }
            recorder?.neverWrite(snapshot.tokenBytes(for: route.config.credential))
            handler.metrics.retriedAfter401(route: route.config.name)
        }
        body = body?.replay()
        send()
    }

    private func follow(
        to target: UpstreamURL, method nextMethod: String, keepsBody: Bool,
        credentials: ForwardStateMachine.CredentialScope
    ) {
        url = target
        revise {
            $0.method = nextMethod
            $0.target = RequestURL(origin: target.origin, path: target.path, query: target.query)
        }
        if keepsBody {
            body = body?.replay()
        } else {
            // The client may still be sending: let the connection drain it (`body` is nil, so
            // its bytes are dropped).
            exchange.resumeBody()
            body = nil
        }
        if credentials == .stripped { handler.credentialsStripped(route: route.config.name) }
        sendHop(credentials)
    }

    /// Sends the hop to `url` with the credential lines, or (once the chain left the credential
    /// hosts) without them.
    private func sendHop(_ credentials: ForwardStateMachine.CredentialScope) {
        switch credentials {
        case .carried:
            send()
        case .stripped:
            // A copy without them: a later hop back on the credential hosts carries them again.
            // No lines injected on this hop: nor is Accept or Content-Type among them.
            var stripped = revised ?? request
            stripped.headers = stripped.headers.removing(Set(injector.strippedOnForeignHosts))
            stripped.supplies = nil
            stripped.extraHeaders = HeaderLines()
            stripped.extraSupplies = SuppliedFields(accept: false, contentType: false)
            send(stripped, length: bodyLength)
        }
    }
}
