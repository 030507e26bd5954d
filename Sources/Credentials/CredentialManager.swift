import Config
import EventLoop
import Synchronization
import Upstream

/// Runs the token lifecycle for the OAuth grants on one "home" loop: the single place where
/// tokens change. IdP calls go through that loop's libcurl client; store writes go to a
/// blocking worker thread; every change is published as a new snapshot to every loop.
/// Other loops talk to it only through the `…(replyOn:)` methods, which hop by message.
public final class CredentialManager: @unchecked Sendable {
    let loop: EventLoop
    let provider: ProviderConfiguration
    /// The provider's name in the config ("default" for the single `provider`); every log line says it.
    public let name: String
    /// Seconds tokens must have been in use before an upstream 401 may refresh them.
    public var minRefreshInterval: Double { provider.minRefreshIntervalSeconds }
    let oauth: OAuthClient
    let http: UpstreamClient
    let store: TokenStore
    let worker: BlockingWorker
    var lifecycle: CredentialLifecycle
    private let publishSnapshot: @Sendable (CredentialSnapshot) -> Void
    private var waiters: [CredentialLifecycle.Waiter: (EventLoop, LoopBound<(CredentialLifecycle.Outcome) -> Void>)] =
        [:]
    private var nextWaiter: CredentialLifecycle.Waiter = 1
    private var refreshTimer: TimerID?
    private var retryTimer: TimerID?
    var pendingLogins: [String: PendingLogin] = [:]
    var device: DeviceFlow?
    let journeys = JourneyState()
    /// Why the provider is not usable yet (discovery failed), if so.
    var providerProblem: String?
    /// Why the tokens in use are not on disk (the last write failed), if so: a restart loses them.
    private var storeProblem: String?
    /// Whether `token_lifetime_short` was logged (once per process).
    private var warnedShortLifetime = false
    private var discoveryFailures = 0
    /// Whether a discovery request (or its retry timer) is under way.
    private var discovering = false
    /// Token-endpoint calls in a row that failed without an OAuth answer (an HTML 404, a 5xx,
    /// no answer): the provider may have moved the endpoint, so discovery is read again.
    private var tokenEndpointFailures = 0
    /// Consecutive failures of the token endpoint after which discovery is read again.
    static let rediscoverAfterFailures = 3
    /// Whether an unusable stored token was logged (once per token generation).
    private var warnedUnsendableGeneration: UInt64?
    /// The token generation the loops last received.
    private var publishedGeneration: UInt64 = 0
    /// Requests told to use newer tokens that were not published yet.
    private var awaitingPublish: [(EventLoop, LoopBound<(CredentialLifecycle.Outcome) -> Void>)] = []
    /// Refreshes by outcome, for the metrics.
    public let refreshOutcomes = RefreshCounters()
    /// Routes' RFC 8693 exchanged tokens for the current subject token (`exchangedToken`).
    let exchanges = ExchangedTokens()

    /// Creates the manager; call `start` on its loop.
    public init(
        provider: ProviderConfiguration, loop: EventLoop, http: UpstreamClient, store: TokenStore,
        worker: BlockingWorker, clientSecret: String?, name: String = "default",
        publish: @escaping @Sendable (CredentialSnapshot) -> Void
    ) {
        self.name = name
        self.provider = provider
        self.loop = loop
        self.store = store
        self.worker = worker
        self.http = http
        publishSnapshot = publish
        oauth = OAuthClient(http: http, provider: provider, clientSecret: clientSecret, now: UnixTime.now)
        lifecycle = CredentialLifecycle(
            selfService: provider.grant == .clientCredentials,
            refreshBefore: provider.refreshBeforeExpirySeconds,
            minRefreshInterval: provider.minRefreshIntervalSeconds)
    }

    /// Starts with the stored tokens (read before the loops ran); discovers the provider first
    /// when configured to, so the first refresh has a token endpoint.
    public func start(stored: TokenSet?) {
        loop.execute { [self] in
            guard let url = provider.discoveryURL else {
                return perform(lifecycle.started(with: stored, now: UnixTime.now()))
            }
            providerProblem = "OIDC discovery has not completed yet"
            // A stored login is usable at once, even while the provider is unreachable; only
            // a self-service grant waits for discovery before its first token request.
            if stored != nil || !lifecycle.selfService { perform(lifecycle.started(with: stored, now: UnixTime.now())) }
            discover(url, startAfter: stored == nil && lifecycle.selfService)
        }
    }

    /// Reads the discovery document again (SIGHUP, or the token endpoint failing repeatedly
    /// without an OAuth answer), so a provider that moved its endpoints is followed. Endpoints
    /// written in the config still win; a failed re-read keeps the endpoints in use.
    public func rediscover(trigger: String) {
        loop.execute { [self] in
            guard let url = provider.discoveryURL, !discovering else { return }
            emit(.info, "provider_rediscovering", ["trigger": .string(trigger)])
            discover(url, startAfter: false)
        }
    }

    private func discover(_ url: UpstreamURL, startAfter: Bool) {
        discovering = true
        let known = oauth.endpoints.token != nil
        oauth.discover(url) { [self] result in
            switch result {
            case .success(let endpoints) where known && endpoints.token == nil:
                // A re-read whose document names no token endpoint (an error object served with
                // 200, a half-written file) would leave nothing to refresh at: the endpoints in
                // use stay, as for a failed re-read.
                discovering = false
                emit(
                    .warning, "provider_rediscovery_failed",
                    ["reason": .string("the discovery document names no token_endpoint")])
            case .success(let endpoints):
                discovering = false
                if known && endpoints != oauth.endpoints {
                    emit(
                        .info, "provider_endpoints_changed",
                        ["tokenEndpoint": .string(endpoints.token?.description ?? "none")])
                }
                oauth.endpoints = endpoints
                tokenEndpointFailures = 0
                providerProblem = nil
                discoveryFailures = 0
                emit(.info, "provider_discovered", ["issuer": .string(url.origin)])
                if startAfter {
                    perform(lifecycle.started(with: nil, now: UnixTime.now()))
                } else {
                    // A refresh that failed only because the endpoints were unknown retries now.
                    publish()
                    perform(lifecycle.retryDue(now: UnixTime.now()))
                }
            case .failure(let failure) where known && providerProblem == nil:
                // A re-read: the endpoints in use stay; the next trigger tries again.
                discovering = false
                emit(.warning, "provider_rediscovery_failed", ["reason": .string(failure.reason)])
            case .failure(let failure):
                discoveryFailures += 1
                let delay = min(60.0, Double(1 << min(discoveryFailures - 1, 6)))
                providerProblem = "OIDC discovery failed: \(failure.reason)"
                emit(
                    .warning, "provider_discovery_failed",
                    ["reason": .string(failure.reason), "retryInSeconds": .double(delay)])
                publish()
                loop.schedule(at: NanoTime.now().adding(seconds: delay)) { [self] in
                    discover(url, startAfter: startAfter)
                }
            }
        }
    }

    /// The grant, for callers that choose how to log in.
    public var grant: ProviderConfiguration.Grant { provider.grant }

    /// Logs one line naming this provider.
    func emit(_ level: LogLevel, _ event: String, _ fields: KeyValuePairs<String, LogValue> = [:]) {
        Log.emit(level, event, fields: [("provider", .string(name))] + fields.map { ($0.key, $0.value) })
    }

    // MARK: requests from any loop

    /// A request on `replyOn` needs tokens newer than `generation` (it saw them expire, or got
    /// a 401 with them). If they already changed, it is told at once; otherwise it joins the
    /// single refresh. `done` runs on `replyOn` after that loop received the new snapshot.
    /// `after401`: an upstream refused the tokens, which refreshes them only when they are old
    /// enough (`minRefreshIntervalSeconds`); else the outcome is `.suppressed`.
    public func refresh(
        seen generation: UInt64, after401: Bool = false, replyOn caller: EventLoop,
        _ done: @escaping (CredentialLifecycle.Outcome) -> Void
    ) {
        let done = LoopBound(done, on: caller)
        loop.execute { [self] in
            if lifecycle.generation != generation, lifecycle.tokens != nil {
                // Newer tokens exist; if they are still being written, answer once they are published.
                if publishedGeneration == lifecycle.generation { return caller.execute { done.value(.ready) } }
                return awaitingPublish.append((caller, done))
            }
            let id = nextWaiter
            nextWaiter += 1
            waiters[id] = (caller, done)
            guard after401 else { return perform(lifecycle.refreshWanted(waiter: id, now: UnixTime.now())) }
            let suppressedBefore = lifecycle.suppressedRefreshes
            perform(lifecycle.rejected(waiter: id, now: UnixTime.now()))
            if lifecycle.suppressedRefreshes != suppressedBefore {
                refreshOutcomes.suppressed.add(1, ordering: .relaxed)
            }
        }
    }

    // MARK: actions

    /// Performs `actions` in order; `then` runs after the last of them, also when a store
    /// write made the rest wait (so a reply sent from `then` follows the published snapshot).
    func perform(_ actions: [CredentialLifecycle.Action], then: (() -> Void)? = nil) {
        for (index, action) in actions.enumerated() {
            switch action {
            case .startRefresh(let refreshToken):
                startRefresh(refreshToken)
            case .persist(let tokens):
                // The login is announced only once it is on disk: the rest waits for the write.
                let store = self.store
                let rest = LoopBound((Array(actions[(index + 1)...]), then), on: loop)
                worker.submit { [self] in
                    let problem: String?
                    do {
                        try store.save(tokens)
                        problem = nil
                    } catch {
                        emit(.error, "token_store_failed", ["error": .string("\(error)")])
                        problem = "the tokens could not be saved (\(error)); they are in use, but a restart loses them"
                    }
                    // Used all the same: the provider may have rotated the refresh token already,
                    // so the old one on disk may be spent.
                    loop.execute { [self] in
                        storeProblem = problem
                        perform(rest.value.0, then: rest.value.1)
                    }
                }
                return
            case .clearStore:
                let store = self.store
                worker.submit {
                    do { try store.delete() } catch {
                        self.emit(.error, "token_store_failed", ["error": .string("\(error)")])
                    }
                }
            case .revoke(let token):
                oauth.revoke(token, hint: "refresh_token") { accepted in
                    self.emit(accepted ? .info : .warning, "token_revoked", ["accepted": .bool(accepted)])
                }
            case .publish:
                publish()
            case .scheduleRefresh(let at):
                if let refreshTimer { loop.cancel(refreshTimer) }
                refreshTimer = at.map { at in
                    loop.schedule(at: Self.deadline(for: at)) { [self] in
                        refreshTimer = nil
                        perform(lifecycle.refreshWanted(waiter: nil, now: UnixTime.now()))
                    }
                }
            case .scheduleRetry(let at):
                if let retryTimer { loop.cancel(retryTimer) }
                retryTimer = loop.schedule(at: Self.deadline(for: at)) { [self] in
                    retryTimer = nil
                    perform(lifecycle.retryDue(now: UnixTime.now()))
                }
            case .resolve(let ids, let outcome):
                for id in ids {
                    guard let (caller, done) = waiters.removeValue(forKey: id) else { continue }
                    caller.execute { done.value(outcome) }
                }
            }
        }
        then?()
    }

    /// The monotonic deadline for a wall-clock time, read fresh (not the iteration's cached
    /// time) plus a millisecond, so the timer never fires before the wall clock reaches `at`.
    static func deadline(for at: Double) -> NanoTime {
        NanoTime.now().adding(seconds: max(0, at - UnixTime.now()) + 0.001)
    }

    private func startRefresh(_ refreshToken: String?) {
        let finish: (Result<TokenSet, OAuthFailure>, TokenCallNotes) -> Void = { [self] result, notes in
            if case .failure(.unavailable) = result { noteTokenEndpointFailure() } else { tokenEndpointFailures = 0 }
            switch result {
            case .success(let tokens):
                refreshOutcomes.ok.add(1, ordering: .relaxed)
                emit(
                    .info, "token_refreshed", ["expiresAt": tokens.expiresAt.map { .double($0) } ?? .string("unknown")])
                let now = UnixTime.now()
                if !warnedShortLifetime, let expiry = tokens.expiresAt,
                    expiry - now <= provider.refreshBeforeExpirySeconds
                {
                    warnedShortLifetime = true
                    emit(
                        .warning, "token_lifetime_short",
                        [
                            "lifetimeSeconds": .double((expiry - now).rounded()),
                            "refreshBeforeExpirySeconds": .double(provider.refreshBeforeExpirySeconds),
                            "message": .string("tokens are refreshed at half their life instead"),
                        ])
                }
                perform(lifecycle.refreshSucceeded(tokens, now: now))
            case .failure(let failure) where failure.grantIsDead:
                refreshOutcomes.refused.add(1, ordering: .relaxed)
                emit(.warning, "token_refresh_refused", ["reason": .string(failure.reason)])
                perform(
                    lifecycle.refreshRefused(
                        "the auth server refused the refresh: \(failure.reason)", now: UnixTime.now(),
                        jitter: Double.random(in: 0..<1)))
            case .failure(.refused(let reason)):
                // Another OAuth error (invalid_client, unauthorized_client, invalid_scope …) is
                // about the client's configuration, not the user's grant: the login stays.
                refreshOutcomes.unavailable.add(1, ordering: .relaxed)
                emit(.warning, "token_refresh_unavailable", ["reason": .string(reason)])
                perform(
                    lifecycle.refreshUnavailable(
                        "the auth server refused the client: \(reason)", now: UnixTime.now(),
                        jitter: Double.random(in: 0..<1), rotatedRefreshToken: notes.refreshToken))
            case .failure(.unavailable(let reason)):
                refreshOutcomes.unavailable.add(1, ordering: .relaxed)
                emit(
                    .warning, "token_refresh_unavailable",
                    [
                        "reason": .string(reason),
                        "refreshTokenRotated": .bool(notes.refreshToken != nil),
                        "answerLost": .bool(notes.answerLost),
                    ])
                perform(
                    lifecycle.refreshUnavailable(
                        "the auth server is unavailable: \(reason)", now: UnixTime.now(),
                        jitter: Double.random(in: 0..<1), rotatedRefreshToken: notes.refreshToken,
                        answerLost: notes.answerLost))
            }
        }
        if let refreshToken {
            oauth.refresh(refreshToken, scopes: nil, completion: finish)
        } else {
            oauth.clientCredentials(scopes: provider.scopes) { finish($0, TokenCallNotes()) }
        }
    }

    /// Counts a token-endpoint failure without an OAuth answer; enough in a row re-read discovery.
    private func noteTokenEndpointFailure() {
        tokenEndpointFailures += 1
        guard tokenEndpointFailures >= Self.rediscoverAfterFailures else { return }
        tokenEndpointFailures = 0
        rediscover(trigger: "token_endpoint_failures")
    }

    /// Builds the snapshot of the current tokens and hands it to every loop.
    func publish() {
        var status = lifecycle.status
        let tokens = lifecycle.tokens
        if status.lastError == nil { status.lastError = providerProblem ?? (tokens == nil ? nil : storeProblem) }
        // Token responses with such tokens are refused; this catches a stored one (tokens.json
        // written by hand or by an older build), whose routes would otherwise fail unexplained.
        if let tokens, let problem = Self.unsendable(tokens) {
            status.lastError = problem
            if warnedUnsendableGeneration != lifecycle.generation {
                warnedUnsendableGeneration = lifecycle.generation
                emit(.error, "token_unusable", ["reason": .string(problem)])
            }
        }
        let snapshot = CredentialSnapshot(
            generation: lifecycle.generation, accessToken: tokens?.accessToken,
            idToken: tokens?.idToken, tokenType: tokens?.tokenType ?? provider.tokenType,
            status: status, providerProblem: providerProblem, obtainedAt: lifecycle.obtainedAt)
        publishSnapshot(snapshot)
        exchanges.follow(generation: lifecycle.generation, loggedIn: tokens != nil)
        publishedGeneration = lifecycle.generation
        let ready = awaitingPublish
        awaitingPublish.removeAll()
        for (caller, done) in ready { caller.execute { done.value(.ready) } }
    }
}

extension CredentialManager {
    /// Why `tokens` cannot be sent in a header (never the token itself), or nil.
    static func unsendable(_ tokens: TokenSet) -> String? {
        if !SecretSource.isHeaderToken(tokens.accessToken) || tokens.accessToken.isEmpty {
            return "the access token cannot be sent in a header (a space, control or non-ASCII byte); log in again"
        }
        if let id = tokens.idToken, !SecretSource.isHeaderToken(id) || id.isEmpty {
            return "the id_token cannot be sent in a header (a space, control or non-ASCII byte); log in again"
        }
        if !SecretSource.isHeaderToken(tokens.tokenType) || tokens.tokenType.isEmpty {
            return "the token type cannot be sent in a header; log in again"
        }
        return nil
    }
}

/// Token refreshes by outcome.
public final class RefreshCounters: Sendable {
    /// New tokens received.
    public let ok = Atomic<Int>(0)
    /// The auth server refused (4xx).
    public let refused = Atomic<Int>(0)
    /// The auth server was unreachable or failed (5xx, 408, 429).
    public let unavailable = Atomic<Int>(0)
    /// Upstream 401s relayed without a refresh: the tokens were younger than `minRefreshIntervalSeconds`.
    public let suppressed = Atomic<Int>(0)
}

extension OAuthFailure {
    /// Whether the provider said the grant itself is dead (`invalid_grant`, RFC 6749 §5.2):
    /// the only answer to a refresh that ends the login.
    public var grantIsDead: Bool {
        guard case .refused(let reason) = self else { return false }
        return reason == "invalid_grant" || reason.hasPrefix("invalid_grant:")
    }

    /// The reason in words (never a token).
    public var reason: String {
        switch self {
        case .refused(let reason), .unavailable(let reason): reason
        }
    }
}
