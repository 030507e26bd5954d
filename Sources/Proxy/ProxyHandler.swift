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
    /// The runtime in force; replaced (on this loop) by a reload, which closes the tunnels whose
    /// route it moved.
    package var runtime: ProxyRuntime {
        didSet { withdrawMovedTunnels() }
    }
    /// This loop's tunnels (WebSockets), made by the first upgrade (`tunnels`).
    var tunnelTable: TunnelTable?
    let loop: EventLoop
    let log: LogBuffer
    private var requestIDs: RequestIDGenerator
    let control: ControlEndpoints
    let metrics = LoopMetrics()
    private let hub: MetricsHub
    /// This loop's libcurl multi handle.
    let upstream: UpstreamClient
    /// Each provider's state on this loop, by name (`ProviderSlot`).
    var slots: [String: ProviderSlot] = [:]
    /// The default provider's tokens in force; replaced (on this loop) by `credentialsChanged`.
    package var credentials: CredentialSnapshot { slot(nil).snapshot }
    /// The analytics sidecar, when configured.
    package var analytics: AnalyticsService?
    /// Experiment overrides, exposures and the installation id.
    package var experimentService: ExperimentService?
    /// Set on the home loop's handler: the uploader follows this loop's token snapshots.
    var uploadsHere = false
    /// The default provider's token lifecycle (OAuth grants); nil for the static grant or no provider.
    package var credentialManager: CredentialManager? {
        get { slot(nil).manager }
        set { slot(nil).manager = newValue }
    }
    /// Phased logins in progress, shared by every loop (a callback may arrive on any of them).
    var loginChains = LoginChains()
    /// `/_platform/auth/events` streams on this loop.
    var eventStreams: [AuthEventStream] = []
    var heartbeat: TimerID?
    /// Index of the `metricsListen` address among the server's listeners, when there is one.
    package var metricsListener: Int?
    /// The `X-Experiments` line, formatted once per subject and config.
    private var experimentLines = ExperimentHeaderCache()
    /// Each route's provider slot and counters for the runtime in force.
    private var routeSlots = RouteSlotTable()

    /// Creates the handler for `loop`.
    package init(runtime: ProxyRuntime, loop: EventLoop, loopIndex: Int, hub: MetricsHub) {
        self.runtime = runtime
        self.hub = hub
        self.loop = loop
        log = LogBuffer(loop: loop)
        requestIDs = RequestIDGenerator(loopIndex: loopIndex)
        control = ControlEndpoints()
        upstream = UpstreamClient(loop: loop)
        hub.add(loop: loop, metrics: metrics)
        for named in runtime.configuration.providers { slots[named.name] = ProviderSlot(name: named.name) }
    }

    /// Installs the token lifecycles of the OAuth providers, by name.
    package func setManagers(_ managers: [String: CredentialManager]) {
        for (name, manager) in managers { slot(name).manager = manager }
    }

    package func handle(_ exchange: HTTPExchange) {
        // `exchange.head` is read in place each time: a local copy would retain its arrays.
        let target = RequestTarget(exchange.head.target)
        // Read once: each read of the stored `var` is a retain and a release of its own.
        let runtime = self.runtime
        let info = ExchangeInfo(requestID: requestID(exchange.head), path: target.path)
        exchange.delegate = info

        if exchange.listener == metricsListener { return handleMetricsListener(exchange, target: target) }
        // `OPTIONS *`: the path is "*" exactly when the target is (the parser takes no other target
        // that starts with "*"), compared on the head's bytes (a substring's UTF-8 view retains it).
        if exchange.head.targetIs("*") { return respondOptions(exchange) }
        let scope = runtime.scope(of: target.path)
        if let (check, error) = runtime.firstRefusal(scope.guards, head: exchange.head, target: target) {
            if check.isScoped { info.route = scope.routeName }
            // TRACE at one of the proxy's own endpoints: that endpoint's `Allow`, not the routes'.
            if check == .noTrace, scope.isPlatform, let endpoint = Self.platformEndpoints.endpoint(for: target.path) {
                return fail(exchange, .methodNotAllowed(endpoint.allow))
            }
            return fail(exchange, error)
        }
        let compiled: CompiledRoute, rest: Substring
        switch scope {
        case .probe, .platform:
            info.route = scope.routeName
            return Self.platformEndpoints.dispatch(exchange, target: target, on: self)
        case .unrouted:
            return fail(exchange, .noRoute(String(target.path)))
        case .route(let route, let routeRest):
            (compiled, rest) = (route, routeRest)
        }
        let routeSlot = routeSlots.slot(compiled, of: runtime) {
            RouteSlot(route: compiled, runtime: runtime, provider: slot(compiled.config.provider),
                      counters: metrics.counters(route: compiled.config.name))
        }
        // The log line's route, counters and provider are the slot's.
        info.slot = routeSlot
        let mockMode = runtime.mockMode(compiled)
        if let upgrade = Self.tunnelledUpgrade(exchange.head, route: compiled.config),
           let refusal = upgradeRefusal(upgrade.token, route: compiled.config, mockMode: mockMode) {
            return fail(exchange, refusal)
        }
        if mockMode == .replay, let mock = compiled.config.mock {
            return replayMock(exchange, directory: mock.directory, rest: rest)
        }
        // Matched in place: `!= nil` copies the URL to compare it (a retain and release of each part).
        guard case .some = routeSlot.upstream else { return fail(exchange, .noRoute(String(target.path))) }
        guard UpstreamTarget.isForwardable(target.path, encodedSlashes: compiled.config.encodedSlashes) else {
            return fail(exchange, .invalidPath)
        }
        // Their last use: moved into the plan, not copied.
        forward(exchange, ForwardPlan(slot: consume routeSlot, rest: consume rest, query: target.query, mockMode: mockMode),
                refreshed: false)
    }

    /// Sends a routed request upstream once its credentials are usable: gated while there is no
    /// login, refreshed first when the token has expired (single-flight, on the home loop).
    func forward(_ exchange: HTTPExchange, _ plan: ForwardPlan, refreshed: Bool) {
        guard !exchange.isAborted else { return }
        // The route is shared by every loop and held by the plan's slot: used unretained
        // (docs/performance.md, "Nothing shared is written").
        unowned(unsafe) let compiled = plan.compiled
        // Each provider has its own tokens, gate and refresher: one's outage never holds another's routes.
        let slot = plan.slot.provider
        let credentials = slot.snapshot
        if compiled.config.credential != .none {
            // The gate is for logins; a static token that cannot be read is a 503 below.
            if !credentials.status.loggedIn && slot.manager != nil {
                return gate(exchange, slot: slot) { [weak self] in self?.forward(exchange, plan, refreshed: refreshed) }
            }
            if !refreshed, let manager = slot.manager, credentials.isExpired(now: UnixTime.now()) {
                // The body waits in the socket until the refresh answers.
                exchange.pauseBody()
                return manager.refresh(seen: credentials.generation, replyOn: loop) { [weak self, weak exchange] outcome in
                    guard let self, let exchange else { return }
                    switch outcome {
                    case .ready: self.forward(exchange, plan, refreshed: true)
                    case .unavailable(let reason): self.fail(exchange, .authServerUnavailable(reason))
                    case .notLoggedIn, .suppressed: self.forward(exchange, plan, refreshed: true)
                    }
                }
            }
        }
        guard let injected = slot.injectedLines.lines(plan, snapshot: credentials) else {
            return fail(exchange, .credentialsUnavailable(compiled.config.credential.rawValue))
        }
        if !injected.lines.isEmpty { plan.slot.counters.injected += 1 }
        if let upgrade = Self.tunnelledUpgrade(exchange.head, route: compiled.config) {
            return startTunnel(exchange, plan, injected: injected, generation: credentials.generation, upgrade: upgrade)
        }
        var experiments: HeaderLines?
        if compiled.config.experimentHeader, let service = experimentService {
            experiments = experimentLines.lines(runtime: plan.runtime, credentials: self.credentials, service: service,
                                                now: UnixTime.now())
        }
        // A masked or recorded response is asked for whole and in its identity form: a compressed
        // or ranged echo would carry the token past the masker (docs/security.md, "Echoed credentials").
        let masks = plan.runtime.configuration.maskEchoedCredentials && compiled.config.credential != .none
        let forwarded = ForwardedExchange(exchange: exchange, slot: plan.slot, upstream: plan.url(), handler: self,
                                          info: exchange.info ?? ExchangeInfo(requestID: "", path: ""),
                                          credentials: consume injected,
                                          generation: credentials.generation, experimentLines: experiments,
                                          identity: masks || plan.mockMode == .record)
        if plan.runtime.configuration.maskEchoedCredentials {
            forwarded.masksEchoes = true
            forwarded.echoMasker = slot.echoTokens.masker(compiled.config.credential, of: credentials)
        }
        if plan.mockMode == .record, let mock = compiled.config.mock {
            forwarded.recorder = MockRecorder(directory: mock.directory, rest: plan.rest, overwrite: mock.overwrite,
                                              neverWritten: slot.echoTokens.bytes(compiled.config.credential, of: credentials))
        }
        forwarded.start(retryBodyBytes: runtime.configuration.limits.retryBodyBytes)
    }

    /// The `metricsListen` address serves metrics, health and readiness only, with no Host or key
    /// check: it is the operator's choice of where a scraper reaches, and it serves no credential.
    private func handleMetricsListener(_ exchange: HTTPExchange, target: RequestTarget) {
        exchange.info?.route = Probe.route
        Self.metricsListenerEndpoints.dispatch(exchange, target: target, on: self)
    }

    /// A probe's answer (the method was checked by `PlatformEndpoints`).
    func answer(_ probe: Probe, _ exchange: HTTPExchange) {
        switch probe {
        case .health: send(exchange, status: 200, headers: Probe.headers, body: runtime.healthBody)
        case .ready: ready(exchange)
        }
    }

    private func ready(_ exchange: HTTPExchange) {
        let headers: [(name: String, value: String)] = [("Content-Type", "application/json"), ("Cache-Control", "no-store")]
        if let reason = unreadyReason() ?? analytics?.unreadyReason() {
            send(exchange, status: 503, headers: headers, body: Array("{\"status\":\"not_ready\",\"reason\":\(jsonQuoted(reason))}".utf8))
        } else if let notices = analytics?.notices, !notices.isEmpty {
            // Ready, with what an operator should know: `notices` names conditions that need no action to serve.
            let list = notices.map(jsonQuoted).joined(separator: ",")
            send(exchange, status: 200, headers: headers, body: Array("{\"status\":\"ready\",\"notices\":[\(list)]}".utf8))
        } else {
            send(exchange, status: 200, headers: headers, body: Array("{\"status\":\"ready\"}".utf8))
        }
    }

    /// The Prometheus text (the method was checked by `PlatformEndpoints`).
    func scrapeMetrics(_ exchange: HTTPExchange) {
        let providers = runtime.configuration.providers.map { ProviderGauge(name: $0.name, status: slot($0.name).snapshot.status) }
        hub.gather(on: loop, providers: providers) { [weak self, weak exchange] text in
            guard let self, let exchange else { return }
            self.send(exchange, status: 200, headers: [("Content-Type", "text/plain; version=0.0.4; charset=utf-8")],
                      body: Array(text.utf8))
        }
    }

    /// A record-mode response was written (or could not be: logged, never fatal).
    func mockRecorded(_ exchange: HTTPExchange, file: String, error: String?) {
        if let error {
            log.emit(.warning, "mock_record_failed", [("requestID", .string(exchange.info?.requestID ?? "")),
                                                      ("file", .string(file)), ("error", .string(error))])
        } else {
            metrics.mockRecorded(route: exchange.info?.route ?? "")
            log.emit(.info, "mock_recorded", [("requestID", .string(exchange.info?.requestID ?? "")), ("file", .string(file))])
        }
    }

    /// An upstream transfer failed; logged with libcurl's reason (which never holds headers).
    func upstreamFailed(_ exchange: HTTPExchange, error: UpstreamError) {
        logUpstream(exchange, error, level: .warning, event: "upstream_failed", kind: error.isTimeout ? "timeout" : "unreachable")
    }

    /// A hop's pooled upstream connection turned out closed before anything came back, and the
    /// hop is sent once more (`ForwardStateMachine.transferCompleted`).
    func upstreamResent(_ exchange: HTTPExchange, error: UpstreamError) {
        logUpstream(exchange, error, level: .info, event: "upstream_resent", kind: "stale_connection")
    }

    private func logUpstream(_ exchange: HTTPExchange, _ error: UpstreamError, level: LogLevel, event: String, kind: String) {
        let info = exchange.info
        log.emit(level, event, [("requestID", .string(info?.requestID ?? "")), ("route", .string(info?.route ?? "")),
                                ("upstream", .string(exchange.upstream ?? "")), ("error", .string(error.description))])
        metrics.upstreamError(route: info?.route ?? "", kind: kind)
    }

    /// A redirect left the credential hosts: injected headers, cookies and Authorization were dropped.
    func credentialsStripped(route: String) { metrics.stripped(route: route) }

    // MARK: answers

    /// The reply function given to endpoint handlers: a whole JSON (or other) response.
    var reply: (HTTPExchange, Int, [(name: String, value: String)], [UInt8]) -> Void {
        { [unowned self] exchange, status, headers, body in self.send(exchange, status: status, headers: headers, body: body) }
    }

    private func replayMock(_ exchange: HTTPExchange, directory: String, rest: Substring) {
        let mocks = runtime.mocks
        exchange.afterBody { [unowned self, unowned exchange] in
            switch mocks.lookup(directory: directory, rest: rest) {
            case .found(let body, _):
                var headers = [(name: "Content-Type", value: "application/json")]
                if MockFiles.isGzip(body) { headers.append((name: "Content-Encoding", value: "gzip")) }
                self.send(exchange, status: 200, headers: headers, body: body)
            // Named relative to the mock folder: a client has no business knowing where it lives.
            case .missing(let file): self.fail(exchange, .mockNotFound(MockFiles.relative(file, to: directory)))
            case .unreadable(let file): self.fail(exchange, .mockUnreadable(MockFiles.relative(file, to: directory)))
            case .invalidPath: self.fail(exchange, .invalidPath)
            }
        }
    }

    private func respondOptions(_ exchange: HTTPExchange) {
        send(exchange, status: 200, headers: [("Allow", "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS")], body: [])
    }

    /// Answers with the JSON error body.
    func fail(_ exchange: HTTPExchange, _ error: ProxyError) {
        let id = exchange.info?.requestID ?? requestIDs.next()
        var headers: [(name: String, value: String)] = [("Content-Type", "application/json")]
        if let allow = error.allow { headers.append(("Allow", allow)) }
        if let retryAfter = error.retryAfter { headers.append(("Retry-After", String(retryAfter))) }
        send(exchange, status: error.status, headers: headers, body: error.body(requestID: id))
    }

    func send(_ exchange: HTTPExchange, status: Int, headers: [(name: String, value: String)], body: [UInt8]) {
        var all = headers
        if let id = exchange.info?.requestID { all.append(("X-Request-ID", id)) }
        exchange.respond(status: status, headers: all, body: body)
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

    package func finished(_ exchange: HTTPExchange, outcome: ExchangeOutcome) {
        switch outcome.ending {
        case .completed: logExchange(exchange, outcome, level: .info, reason: nil)
        case .truncated: logExchange(exchange, outcome, level: .warning, reason: "upstream_body_longer_than_content_length")
        case .clientClosed(let reason), .aborted(let reason): logExchange(exchange, outcome, level: .info, reason: reason)
        case .refused(let reason): logExchange(exchange, outcome, level: .warning, reason: reason)
        }
        if !eventStreams.isEmpty { eventStreams.removeAll { $0.exchange === exchange } }
    }

    /// The server's own refusals, rendered as the proxy's JSON errors (`Connection: close`).
    package func refusal(_ refusal: HTTPRefusal, exchange: HTTPExchange?, peer: String) -> [UInt8] {
        if let exchange, exchange.info == nil {
            // Refused before `handle` saw it (a Content-Length over the limit): the access log
            // line gets the ID the client is sent, and the path.
            exchange.delegate = ExchangeInfo(requestID: requestID(exchange.head), path: RequestTarget(exchange.head.target).path)
        }
        let requestID = exchange?.info?.requestID ?? requestIDs.next()
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

    private func logExchange(_ exchange: HTTPExchange, _ result: ExchangeOutcome, level: LogLevel, reason outcome: String?) {
        let seconds = loop.now.seconds(since: exchange.startedAt)
        // nginx's 499: the client went away before any response was sent.
        var status = result.status
        if status == 0, case .clientClosed = result.ending { status = 499 }
        var level = level
        let info = exchange.info
        // A routed request has its route's counters; only the others are told apart by name.
        if let counters = info?.counters {
            counters.request(status: status, seconds: seconds)
        } else if info?.route == Probe.route {
            // Probes and scrapes arrive every few seconds for the life of the process: not traffic.
            if level == .info { level = .debug }
        } else {
            metrics.request(route: info?.route ?? "_unrouted", status: status, seconds: seconds)
        }
        guard level > .info || runtime.configuration.accessLog else { return }
        // Written straight into the loop's log buffer: no array of fields, no String per value.
        let micros = Int((seconds * 1e6).rounded())
        log.emit(level, "request") { line in
            line.field("requestID", info?.requestID ?? "")
            exchange.head.storage.withUnsafeBufferPointer { line.field("method", bytes: UnsafeBufferPointer(rebasing: $0[exchange.head.methodRange])) }
            line.field("path", Self.loggedPath(info?.path ?? ""))
            line.field("route", info?.route ?? "")
            line.field("status", status)
            line.field("durationMs", thousandths: micros)
            line.field("bytesIn", result.bytesIn)
            line.field("bytesOut", result.bytesOut)
            line.field("peer", exchange.peer)
            if let provider = info?.provider { line.field("provider", provider) }
            if let upstream = exchange.upstreamURL { line.field("upstream", joining: upstream.origin, upstream.path) }
            if let outcome { line.field("outcome", outcome) }
        }
    }
}
