import Glibc
import Analytics
import Config
import Credentials
import EventLoop
import Experiments
import HTTP1
import HTTPServer
import JSON
import Upstream

/// The request pipeline of one loop: local security → control endpoints → router → route policy.
package final class ProxyHandler: HTTPHandler {
    /// The runtime in force; replaced (on this loop) by a reload.
    package var runtime: ProxyRuntime
    let loop: EventLoop
    let log: LogBuffer
    private var requestIDs: RequestIDGenerator
    let control = ControlEndpoints()
    let metrics = LoopMetrics()
    private let hub: MetricsHub
    /// This loop's libcurl multi handle.
    package let upstream: UpstreamClient
    /// Each provider's state on this loop, by name (`ProviderSlot`).
    var slots: [String: ProviderSlot] = [:]
    /// The default provider's tokens in force; replaced (on this loop) by `credentialsChanged`.
    package var credentials: CredentialSnapshot { slot(nil).snapshot }
    /// The analytics sidecar, when configured.
    let analytics: AnalyticsService?
    /// Experiment overrides, exposures and the installation id.
    let experimentService: ExperimentService?
    /// The home loop's handler: the analytics uploader follows this loop's token snapshots.
    let uploadsHere: Bool
    /// Phased logins in progress, shared by every loop (a callback may arrive on any of them).
    let loginChains: LoginChains
    /// `/_platform/auth/events` streams on this loop.
    var eventStreams: [AuthEventStream] = []
    var heartbeat: TimerID?
    /// Index of the `metricsListen` address among the server's listeners, when there is one.
    let metricsListener: Int?
    /// The `X-Experiments` line, formatted once per subject and config.
    private var experimentLines = ExperimentHeaderCache()
    /// Each route's provider slot and counters for the runtime in force.
    private var routeSlots = RouteSlotTable()

    /// Creates the handler for `parameters.loop`, its providers' managers and first tokens in place.
    package init(_ parameters: ProxyHandlerParameters) {
        runtime = parameters.runtime
        hub = parameters.hub
        loop = parameters.loop
        log = LogBuffer(loop: parameters.loop)
        requestIDs = RequestIDGenerator(loopIndex: parameters.loopIndex)
        upstream = parameters.upstream
        analytics = parameters.analytics
        experimentService = parameters.experiments
        uploadsHere = parameters.loopIndex == 0
        loginChains = parameters.loginChains
        metricsListener = parameters.metricsListener
        hub.add(loop: loop, metrics: metrics)
        for named in runtime.configuration.providers { slots[named.name] = ProviderSlot(name: named.name) }
        for (name, manager) in parameters.managers { slot(name).manager = manager }
        for (provider, snapshot) in parameters.initialSnapshots { credentialsChanged(snapshot, provider: provider) }
    }

    package func handle(_ exchange: HTTPExchange) {
        // `exchange.head` is read in place each time: a local copy would retain its arrays.
        let target = RequestTarget(exchange.head.target)
        // Read once: each read of the stored `var` is a retain and a release of its own.
        let runtime = self.runtime
        let context = ExchangeContext(exchange, requestID: requestID(exchange.head), path: target.path, handler: self)
        exchange.delegate = context

        if exchange.listener == metricsListener { return handleMetricsListener(context, target: target) }
        // `OPTIONS *`: the path is "*" exactly when the target is (the parser takes no other target
        // that starts with "*"), compared on the head's bytes (a substring's UTF-8 view retains it).
        if exchange.head.targetIs("*") { return respondOptions(context) }
        let scope = runtime.scope(of: target.path)
        if let (check, error) = runtime.firstRefusal(scope.guards, head: exchange.head, target: target) {
            if check.isScoped { context.route = scope.routeName }
            // TRACE at one of the proxy's own endpoints: that endpoint's `Allow`, not the routes'.
            if check == .noTrace, scope.isPlatform, let endpoint = Self.platformEndpoints.endpoint(for: target.path) {
                return fail(context, .methodNotAllowed(endpoint.allow))
            }
            return fail(context, error)
        }
        let compiled: CompiledRoute, rest: Substring
        switch scope {
        case .probe, .platform:
            context.route = scope.routeName
            return Self.platformEndpoints.dispatch(context, target: target, on: self)
        case .unrouted:
            return fail(context, .noRoute(String(target.path)))
        case .route(let route, let routeRest):
            (compiled, rest) = (route, routeRest)
        }
        let routeSlot = routeSlots.slot(compiled, of: runtime) {
            RouteSlot(route: compiled, runtime: runtime, provider: slot(compiled.config.provider),
                      counters: metrics.counters(route: compiled.config.name))
        }
        // The log line's route, counters and provider are the slot's.
        context.slot = routeSlot
        let mockMode = runtime.mockMode(compiled)
        if mockMode == .replay, let mock = compiled.config.mock {
            return replayMock(context, directory: mock.directory, rest: rest)
        }
        // Matched in place: `!= nil` copies the URL to compare it (a retain and release of each part).
        guard case .some = routeSlot.upstream else { return fail(context, .noRoute(String(target.path))) }
        guard UpstreamTarget.isForwardable(target.path, encodedSlashes: compiled.config.encodedSlashes) else {
            return fail(context, .invalidPath)
        }
        // Their last use: moved into the plan, not copied.
        forward(context, ForwardPlan(slot: consume routeSlot, rest: consume rest, query: target.query, mockMode: mockMode),
                refreshed: false)
    }

    /// Sends a routed request upstream once its credentials are usable: gated while there is no
    /// login, refreshed first when the token has expired (single-flight, on the home loop).
    func forward(_ context: ExchangeContext, _ plan: ForwardPlan, refreshed: Bool) {
        let exchange = context.exchange
        guard !exchange.isAborted else { return }
        // The route is shared by every loop and kept alive by the plan's slot: used unretained.
        let route = plan.route
        // Each provider has its own tokens, gate and refresher: one's outage never holds another's routes.
        let slot = plan.slot.provider
        let credentials = slot.snapshot
        if route.object.config.credential != .none {
            // The gate is for logins; a static token that cannot be read is a 503 below.
            if !credentials.status.loggedIn && slot.manager != nil {
                return gate(context, slot: slot) { [weak self] in self?.forward(context, plan, refreshed: refreshed) }
            }
            if !refreshed, let manager = slot.manager, credentials.isExpired(now: UnixTime.now()) {
                // The body waits in the socket until the refresh answers.
                exchange.pauseBody()
                return manager.refresh(seen: credentials.generation, replyOn: loop) { [weak self, weak context] outcome in
                    guard let self, let context else { return }
                    switch outcome {
                    case .ready: self.forward(context, plan, refreshed: true)
                    case .unavailable(let reason): self.fail(context, .authServerUnavailable(reason))
                    case .notLoggedIn, .suppressed: self.forward(context, plan, refreshed: true)
                    }
                }
            }
        }
        guard let injected = slot.injectedLines.lines(plan, snapshot: credentials) else {
            return fail(context, .credentialsUnavailable(route.object.config.credential.rawValue))
        }
        if !injected.lines.isEmpty { plan.slot.counters.injected += 1 }
        var experiments: HeaderLines?
        if route.object.config.experimentHeader, let service = experimentService {
            experiments = experimentLines.lines(runtime: plan.runtime, credentials: self.credentials, service: service,
                                                now: UnixTime.now())
        }
        // A masked or recorded response is asked for whole and in its identity form: a compressed
        // or ranged echo would carry the token past the masker (README "Echoed credentials").
        let masks = plan.runtime.configuration.maskEchoedCredentials && route.object.config.credential != .none
        let forwarded = ForwardedExchange(context: context, slot: plan.slot, upstream: plan.url(), handler: self,
                                          credentials: consume injected,
                                          generation: credentials.generation, experimentLines: experiments,
                                          identity: masks || plan.mockMode == .record)
        if plan.runtime.configuration.maskEchoedCredentials {
            forwarded.masksEchoes = true
            forwarded.echoMasker = slot.echoTokens.masker(route.object.config.credential, of: credentials)
        }
        if plan.mockMode == .record, let mock = route.object.config.mock {
            forwarded.recorder = MockRecorder(directory: mock.directory, rest: plan.rest, overwrite: mock.overwrite,
                                              neverWritten: slot.echoTokens.bytes(route.object.config.credential, of: credentials))
        }
        forwarded.start(retryBodyBytes: runtime.configuration.limits.retryBodyBytes)
    }

    /// The `metricsListen` address serves metrics, health and readiness only, with no Host or key
    /// check: it is the operator's choice of where a scraper reaches, and it serves no credential.
    private func handleMetricsListener(_ context: ExchangeContext, target: RequestTarget) {
        context.route = Probe.route
        Self.metricsListenerEndpoints.dispatch(context, target: target, on: self)
    }

    /// A probe's answer (the method was checked by `PlatformEndpoints`).
    func answer(_ probe: Probe, _ context: ExchangeContext) {
        switch probe {
        case .health: send(context, status: 200, headers: Probe.headers, body: runtime.healthBody)
        case .ready: ready(context)
        }
    }

    private func ready(_ context: ExchangeContext) {
        let headers: [(name: String, value: String)] = [("Content-Type", "application/json"), ("Cache-Control", "no-store")]
        if let reason = unreadyReason() ?? analytics?.unreadyReason() {
            send(context, status: 503, headers: headers, body: Array("{\"status\":\"not_ready\",\"reason\":\(jsonQuoted(reason))}".utf8))
        } else if let notices = analytics?.notices, !notices.isEmpty {
            // Ready, with what an operator should know: `notices` names conditions that need no action to serve.
            let list = notices.map(jsonQuoted).joined(separator: ",")
            send(context, status: 200, headers: headers, body: Array("{\"status\":\"ready\",\"notices\":[\(list)]}".utf8))
        } else {
            send(context, status: 200, headers: headers, body: Array("{\"status\":\"ready\"}".utf8))
        }
    }

    /// The Prometheus text (the method was checked by `PlatformEndpoints`).
    func scrapeMetrics(_ context: ExchangeContext) {
        let providers = runtime.configuration.providers.map { ProviderGauge(name: $0.name, status: slot($0.name).snapshot.status) }
        hub.gather(on: loop, providers: providers) { [weak self, weak context] text in
            guard let self, let context else { return }
            self.send(context, status: 200, headers: [("Content-Type", "text/plain; version=0.0.4; charset=utf-8")],
                      body: Array(text.utf8))
        }
    }

    /// A record-mode response was written (or could not be: logged, never fatal).
    func mockRecorded(_ context: ExchangeContext, file: String, error: String?) {
        if let error {
            log.emit(.warning, "mock_record_failed", [("requestID", .string(context.requestID)),
                                                      ("file", .string(file)), ("error", .string(error))])
        } else {
            metrics.mockRecorded(route: context.route ?? "")
            log.emit(.info, "mock_recorded", [("requestID", .string(context.requestID)), ("file", .string(file))])
        }
    }

    /// An upstream transfer failed; logged with libcurl's reason (which never holds headers).
    func upstreamFailed(_ context: ExchangeContext, upstream: UpstreamURL, error: UpstreamError) {
        logUpstream(context, upstream, error, level: .warning, event: "upstream_failed", kind: error.isTimeout ? "timeout" : "unreachable")
    }

    /// A hop's pooled upstream connection turned out closed before anything came back, and the
    /// hop is sent once more (`ForwardStateMachine.transferCompleted`).
    func upstreamResent(_ context: ExchangeContext, upstream: UpstreamURL, error: UpstreamError) {
        logUpstream(context, upstream, error, level: .info, event: "upstream_resent", kind: "stale_connection")
    }

    private func logUpstream(_ context: ExchangeContext, _ upstream: UpstreamURL, _ error: UpstreamError, level: LogLevel,
                             event: String, kind: String) {
        // `origin + path`, never the query: it may carry secrets.
        log.emit(level, event, [("requestID", .string(context.requestID)), ("route", .string(context.route ?? "")),
                                ("upstream", .string(upstream.origin + upstream.path)), ("error", .string(error.description))])
        metrics.upstreamError(route: context.route ?? "", kind: kind)
    }

    /// A redirect left the credential hosts: injected headers, cookies and Authorization were dropped.
    func credentialsStripped(route: String) { metrics.stripped(route: route) }

    // MARK: answers

    private func replayMock(_ context: ExchangeContext, directory: String, rest: Substring) {
        let mocks = runtime.mocks
        context.afterBody = { [unowned self, unowned context] in
            switch mocks.lookup(directory: directory, rest: rest) {
            case .found(let body, _):
                var headers = [(name: "Content-Type", value: "application/json")]
                if MockFiles.isGzip(body) { headers.append((name: "Content-Encoding", value: "gzip")) }
                self.send(context, status: 200, headers: headers, body: body)
            // Named relative to the mock folder: a client has no business knowing where it lives.
            case .missing(let file): self.fail(context, .mockNotFound(MockFiles.relative(file, to: directory)))
            case .unreadable(let file): self.fail(context, .mockUnreadable(MockFiles.relative(file, to: directory)))
            case .invalidPath: self.fail(context, .invalidPath)
            }
        }
    }

    private func respondOptions(_ context: ExchangeContext) {
        send(context, status: 200, headers: [("Allow", "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS")], body: [])
    }

    /// Answers with the JSON error body.
    func fail(_ context: ExchangeContext, _ error: ProxyError) {
        var headers: [(name: String, value: String)] = [("Content-Type", "application/json")]
        if let allow = error.allow { headers.append(("Allow", allow)) }
        if let retryAfter = error.retryAfter { headers.append(("Retry-After", String(retryAfter))) }
        send(context, status: error.status, headers: headers, body: error.body(requestID: context.requestID))
    }

    /// Answers with `body`, the request's `X-Request-ID` added to `headers`.
    func send(_ context: ExchangeContext, status: Int, headers: [(name: String, value: String)], body: [UInt8]) {
        var all = headers
        all.append(("X-Request-ID", context.requestID))
        context.exchange.respond(status: status, headers: all, body: body)
    }

    /// The client's X-Request-ID when it is a sane token (≤ 128 visible ASCII bytes), else a new one.
    private func requestID(_ head: borrowing HTTPRequestHead) -> String {
        if let given = head.first("X-Request-ID"), !given.isEmpty, given.utf8.count <= 128,
           given.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") }) {
            return given
        }
        return requestIDs.next()
    }

    // MARK: server events

    /// An exchange ended: its access log line was written by `exchangeFinished`, which its
    /// delegate (the context, or the forwarding that keeps it) calls just before this.
    package func finished(_ exchange: HTTPExchange, outcome: ExchangeOutcome) {
        if !eventStreams.isEmpty { eventStreams.removeAll { $0.exchange === exchange } }
    }

    /// Counts and logs a finished exchange; `upstream` is its latest hop's URL when it was forwarded.
    func exchangeFinished(_ context: ExchangeContext, outcome: ExchangeOutcome, upstream: UpstreamURL?) {
        switch outcome.ending {
        case .completed: logExchange(context, outcome, upstream, level: .info, reason: nil)
        case .truncated: logExchange(context, outcome, upstream, level: .warning, reason: "upstream_body_longer_than_content_length")
        case .clientClosed(let reason), .aborted(let reason): logExchange(context, outcome, upstream, level: .info, reason: reason)
        case .refused(let reason): logExchange(context, outcome, upstream, level: .warning, reason: reason)
        }
    }

    /// The server's own refusals, rendered as the proxy's JSON errors (`Connection: close`).
    package func refusal(_ refusal: HTTPRefusal, exchange: HTTPExchange?, peer: String) -> [UInt8] {
        var context: ExchangeContext?
        if let exchange {
            // The server names only the exchange: its context is found from its delegate here,
            // on this rare path alone.
            context = (exchange.delegate as? any ProxyExchangeDelegate)?.context
            if context == nil {
                // Refused before `handle` saw it (a Content-Length over the limit): the access log
                // line gets the ID the client is sent, and the path.
                let made = ExchangeContext(exchange, requestID: requestID(exchange.head),
                                           path: RequestTarget(exchange.head.target).path, handler: self)
                exchange.delegate = made
                context = made
            }
        }
        let requestID = context?.requestID ?? requestIDs.next()
        let body = Array("{\"error\":\"\(refusal.code)\",\"message\":\"\(refusal.message)\",\"requestID\":\"\(requestID)\"}".utf8)
        let head = HTTPResponseHead(status: refusal.status, headers: [
            ("Content-Type", "application/json"), ("Content-Length", String(body.count)),
            ("X-Request-ID", requestID), ("Connection", "close"),
        ])
        var bytes: [UInt8] = []
        head.serialize(into: &bytes)
        bytes.append(contentsOf: body)
        if exchange == nil {
            if refusal.isConnectionLimit {
                Log.emit(.warning, "connection_refused", ["reason": .string("max_connections"), "peer": .string(peer),
                                                          "requestID": .string(requestID)])
            } else {
                // Bytes that never became a request.
                metrics.request(route: "_unrouted", status: refusal.status, seconds: 0)
                log.emit(.warning, "bad_request", [("requestID", .string(requestID)), ("status", .int(refusal.status)),
                                                   ("reason", .string(refusal.reason)), ("peer", .string(peer))])
            }
        }
        return bytes
    }

    /// The path as logged: a journey step id is a bearer capability for that step, so it is
    /// never written to the access log.
    static func loggedPath(_ path: Substring) -> Substring {
        let steps: StaticString = "/_platform/login/journey/"
        let masked = path.withUTF8Bytes { bytes in
            bytes.count > steps.utf8CodeUnitCount && memcmp(bytes.baseAddress!, steps.utf8Start, steps.utf8CodeUnitCount) == 0
        }
        return masked ? "/_platform/login/journey/<step>" : path
    }

    private func logExchange(_ info: ExchangeContext, _ result: ExchangeOutcome, _ upstream: UpstreamURL?, level: LogLevel,
                             reason outcome: String?) {
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
        guard level > .info || runtime.configuration.accessLog else { return }
        // Written straight into the loop's log buffer: no array of fields, no String per value.
        let micros = Int((seconds * 1e6).rounded())
        log.emit(level, "request") { line in
            line.field("requestID", info.requestID)
            exchange.head.storage.withUnsafeBufferPointer { line.field("method", bytes: UnsafeBufferPointer(rebasing: $0[exchange.head.methodRange])) }
            line.field("path", Self.loggedPath(info.path))
            line.field("route", info.route ?? "")
            line.field("status", status)
            line.field("durationMs", thousandths: micros)
            line.field("bytesIn", result.bytesIn)
            line.field("bytesOut", result.bytesOut)
            line.field("peer", exchange.peer)
            if let provider = info.provider { line.field("provider", provider) }
            if let upstream { line.field("upstream", joining: upstream.origin, upstream.path) }
            if let outcome { line.field("outcome", outcome) }
        }
    }
}
