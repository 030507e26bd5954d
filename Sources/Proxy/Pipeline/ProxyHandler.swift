import Analytics
import Config
import Credentials
import EventLoop
import Experiments
import Glibc
import HTTP1
import HTTPServer
import JSON
import Upstream

/// The request pipeline of one loop: local security → control endpoints → router → route policy.
public final class ProxyHandler: HTTPHandler {
    /// The runtime in force; replaced (on this loop) by a reload, which closes the tunnels whose
    /// route it moved.
    public var runtime: ProxyRuntime {
        didSet { withdrawMovedTunnels() }
    }
    /// This loop's tunnels (WebSockets), made by the first upgrade (`tunnels`).
    var tunnelTable: TunnelTable?
    /// The process's tunnel counts and caps (`TunnelAdmission`), shared by every loop.
    let tunnelAdmission: TunnelAdmission
    /// The loop this handler serves on; every method runs on it.
    let loop: EventLoop
    /// This loop's log buffer.
    let log: LogBuffer
    /// Request IDs for requests that bring none (unique across loops: each has its own prefix).
    var requestIDs: RequestIDGenerator
    /// The mock switch endpoint.
    let control = ControlEndpoints()
    /// This loop's counters.
    let metrics = LoopMetrics()
    /// This loop's recent exchanges, for the console.
    let requestRing = RequestRing()
    /// Gathers every loop's counters for a scrape.
    let hub: MetricsHub
    /// This loop's libcurl multi handle.
    public let upstream: UpstreamClient
    /// Each provider's state on this loop, by name (`ProviderSlot`).
    var slots: [String: ProviderSlot] = [:]
    /// The default provider's tokens in force; replaced (on this loop) by `credentialsChanged`.
    public var credentials: CredentialSnapshot { slot(nil).snapshot }
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
    /// The keep-alive timer of those streams, while any is open.
    var heartbeat: TimerID?
    /// Index of the `metricsListen` address among the server's listeners, when there is one.
    let metricsListener: Int?
    /// The `X-Experiments` line, formatted once per subject and config.
    private var experimentLines = ExperimentHeaderCache()
    /// Each route's provider slot and counters for the runtime in force.
    private var routeSlots = RouteSlotTable()

    /// Creates the handler for `parameters.loop`, its providers' managers and first tokens in place.
    public init(_ parameters: ProxyHandlerParameters) {
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
        tunnelAdmission = parameters.tunnelAdmission
        hub.add(loop: loop, metrics: metrics)
        hub.requestRings.append((loop, requestRing))
        for named in runtime.configuration.providers { slots[named.name] = ProviderSlot(name: named.name) }
        for (name, manager) in parameters.managers { slot(name).manager = manager }
        for (provider, snapshot) in parameters.initialSnapshots { credentialsChanged(snapshot, provider: provider) }
    }

    public func handle(_ exchange: HTTPExchange) {
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
        case .probe, .platform, .consoleAsset:
            context.route = scope.routeName
            return Self.platformEndpoints.dispatch(context, target: target, on: self)
        case .unrouted:
            return fail(context, .noRoute(String(target.path)))
        case .route(let route, let routeRest):
            (compiled, rest) = (route, routeRest)
        }
        let routeSlot = routeSlots.slot(compiled, of: runtime) {
            RouteSlot(
                route: compiled, runtime: runtime, provider: slot(compiled.config.provider),
                counters: metrics.counters(route: compiled.config.name))
        }
        // The log line's route, counters and provider are the slot's.
        context.slot = routeSlot
        let mockMode = runtime.mockMode(compiled)
        // A route with an upstream in mock mode refuses an upgrade it would otherwise tunnel; a
        // mock-only route has nothing to tunnel to, and serves its mock as for any request.
        if case .some = routeSlot.upstream, case .some = exchange.head.upgradeValue,
            let upgrade = Self.tunnelledUpgrade(exchange.head, upgrades: compiled.config.upgrades),
            let refusal = upgradeRefusal(upgrade.token, route: compiled.config, mockMode: mockMode)
        {
            return fail(context, refusal)
        }
        if mockMode == .replay, let mock = compiled.config.mock {
            return replayMock(context, directory: mock.directory, rest: rest)
        }
        // Matched in place: `!= nil` copies the URL to compare it (a retain and release of each part).
        guard case .some = routeSlot.upstream else { return fail(context, .noRoute(String(target.path))) }
        guard UpstreamTarget.isForwardable(target.path, encodedSlashes: compiled.config.encodedSlashes) else {
            return fail(context, .invalidPath)
        }
        // Their last use: moved into the plan, not copied.
        forward(
            context, ForwardPlan(slot: consume routeSlot, rest: consume rest, query: target.query, mockMode: mockMode),
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
                return manager.refresh(seen: credentials.generation, replyOn: loop) {
                    [weak self, weak context] outcome in
                    guard let self, let context else { return }
                    switch outcome {
                    case .ready: self.forward(context, plan, refreshed: true)
                    case .unavailable(let reason): self.fail(context, .authServerUnavailable(reason))
                    case .notLoggedIn, .suppressed: self.forward(context, plan, refreshed: true)
                    }
                }
            }
        }
        let injected: InjectedLines
        if let target = route.object.config.tokenExchange {
            guard
                let lines = exchangedLines(
                    context, plan, target: target, credentials: credentials,
                    refreshed: refreshed)
            else { return }
            injected = lines
        } else {
            guard let lines = slot.injectedLines.lines(plan, snapshot: credentials) else {
                return fail(context, .credentialsUnavailable(route.object.config.credential.rawValue))
            }
            injected = lines
        }
        if !injected.lines.isEmpty { plan.slot.counters.injected += 1 }
        let echoMasker =
            plan.runtime.configuration.maskEchoedCredentials
            ? (route.object.config.tokenExchange == nil
                ? slot.echoTokens.masker(route.object.config.credential, of: credentials)
                : slot.exchangedLines.masker(plan))
            : nil
        if case .some = exchange.head.upgradeValue,
            let upgrade = Self.tunnelledUpgrade(exchange.head, upgrades: route.object.config.upgrades)
        {
            return startTunnel(
                context, plan, injected: injected, generation: credentials.generation, upgrade: upgrade,
                echoMasker: echoMasker)
        }
        var experiments: HeaderLines?
        if route.object.config.experimentHeader, let service = experimentService {
            experiments = experimentLines.lines(
                runtime: plan.runtime, credentials: self.credentials, service: service,
                now: UnixTime.now())
        }
        // A masked or recorded response is asked for whole and in its identity form: a compressed
        // or ranged echo would carry the token past the masker (docs/security.md, "Echoed credentials").
        let masks = plan.runtime.configuration.maskEchoedCredentials && route.object.config.credential != .none
        let forwarded = ForwardedExchange(
            context: context, slot: plan.slot, upstream: plan.url(), handler: self,
            credentials: consume injected,
            generation: credentials.generation, experimentLines: experiments,
            identity: masks || plan.mockMode == .record)
        if plan.runtime.configuration.maskEchoedCredentials {
            forwarded.masksEchoes = true
            forwarded.echoMasker = echoMasker
        }
        if plan.mockMode == .record, let mock = route.object.config.mock {
            let sent =
                route.object.config.tokenExchange == nil
                ? slot.echoTokens.bytes(route.object.config.credential, of: credentials)
                : slot.exchangedLines.bytes(plan)
            forwarded.recorder = MockRecorder(
                directory: mock.directory, rest: plan.rest, overwrite: mock.overwrite,
                neverWritten: sent)
        }
        forwarded.start(retryBodyBytes: runtime.configuration.limits.retryBodyBytes)
    }

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
    func requestID(_ head: borrowing HTTPRequestHead) -> String {
        if let given = head.first("X-Request-ID"), !given.isEmpty, given.utf8.count <= 128,
            given.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") })
        {
            return given
        }
        return requestIDs.next()
    }
}
