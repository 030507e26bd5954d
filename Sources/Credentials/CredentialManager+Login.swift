import Config
import EventLoop
import Upstream

/// Why a login did not complete, in words for the user (never a secret).
public struct LoginFailure: Error, Sendable, Equatable {
    /// The sentence.
    public let message: String
    /// The authorization server's `error` code when it refused the login (`access_denied`,
    /// `login_required`, …), else nil.
    public let code: String?
    /// Set when the login was not started because too many are in progress: seconds until the
    /// oldest of them expires.
    public let retryAfter: Double?
    init(_ message: String, code: String? = nil, retryAfter: Double? = nil) {
        self.message = message
        self.code = code
        self.retryAfter = retryAfter
    }
}

/// A started authorization-code login, keyed by its `state`.
struct PendingLogin {
    let verifier: String
    let expires: Double
    /// Started by a navigation from another site (`loginURL`'s `crossSite`).
    var crossSite = false
}

/// A device authorization being polled.
struct DeviceFlow {
    let deviceCode: String
    var interval: Double
    let expires: Double
}

extension CredentialManager {
    /// How long a started browser login stays valid.
    static let loginLifetime = 600.0
    /// Most unfinished browser logins kept at once. Each is kept for its lifetime: while this
    /// many are live a new start is refused, so a burst of starts (another site, a script)
    /// cannot push out the login the user is finishing.
    static let maxPendingLogins = 32
    /// Most of them started by navigations from other sites: a page that can navigate a window
    /// (a popup it opened, again and again) would otherwise fill the table and refuse every
    /// login the user starts for as long as it stays open; the other places are kept for starts
    /// from the proxy's own pages, a typed address or a local client.
    static let maxCrossSitePendingLogins = maxPendingLogins / 2

    /// The authorization URL for a new PKCE (S256) login with a fresh random `state`, which
    /// `onState` hears before the URL is handed out. `silent` asks for `prompt=none`: the
    /// provider answers from its session or redirects back with `login_required`. `crossSite`:
    /// the start is a navigation from another site (`maxCrossSitePendingLogins`).
    public func loginURL(
        silent: Bool = false, crossSite: Bool = false, onState: (@Sendable (String) -> Void)? = nil,
        replyOn caller: EventLoop, _ done: @escaping (Result<String, LoginFailure>) -> Void
    ) {
        let done = LoopBound(done, on: caller)
        loop.execute { [self] in
            let result = makeLoginURL(silent: silent, crossSite: crossSite, onState: onState)
            caller.execute { done.value(result) }
        }
    }

    private func makeLoginURL(silent: Bool, crossSite: Bool, onState: (@Sendable (String) -> Void)?) -> Result<
        String, LoginFailure
    > {
        guard provider.grant == .authorizationCode else {
            return .failure(LoginFailure("the \(provider.grant.rawValue) grant has no browser login"))
        }
        guard let endpoint = oauth.endpoints.authorization else {
            return .failure(LoginFailure(providerProblem ?? "the provider has no authorization endpoint"))
        }
        guard let clientID = provider.clientID, let redirect = provider.redirectURI else {
            return .failure(LoginFailure("clientID and redirectURI are required for a browser login"))
        }
        let now = UnixTime.now()
        pendingLogins = pendingLogins.filter { $0.value.expires > now }
        let counted = crossSite ? pendingLogins.values.filter(\.crossSite) : Array(pendingLogins.values)
        let limit = crossSite ? Self.maxCrossSitePendingLogins : Self.maxPendingLogins
        if counted.count >= limit {
            let wait = (counted.map(\.expires).min() ?? now) - now
            emit(
                .warning, "login_start_refused",
                [
                    "reason": .string("too many logins in progress"),
                    "pending": .int(pendingLogins.count), "crossSite": .bool(crossSite),
                ])
            return .failure(
                LoginFailure(
                    "\(limit) logins were started\(crossSite ? " from other sites" : "") in the last "
                        + "\(Int(Self.loginLifetime / 60)) minutes and none of them finished. Finish one of them, "
                        + "or start again in \(Int(wait.rounded(.up))) seconds.", retryAfter: wait))
        }
        let pkce = PKCE.generate()
        let state = randomToken()
        pendingLogins[state] = PendingLogin(
            verifier: pkce.verifier, expires: now + Self.loginLifetime, crossSite: crossSite)
        onState?(state)
        var parameters = [
            ("response_type", "code"), ("client_id", clientID), ("redirect_uri", redirect.description),
            ("scope", provider.scopes.joined(separator: " ")), ("state", state),
            ("code_challenge", pkce.challenge), ("code_challenge_method", PKCE.method), ("nonce", randomToken()),
        ]
        if silent { parameters.append(("prompt", "none")) }
        let query = FormEncoding.encode(parameters)
        return .success(endpoint.description + (endpoint.query == nil ? "?" : "&") + query)
    }

    /// The redirect back from the authorization server: checks `state`, exchanges the code.
    public func completeLogin(
        query: [(String, String)], replyOn caller: EventLoop, _ done: @escaping (Result<Void, LoginFailure>) -> Void
    ) {
        let done = LoopBound(done, on: caller)
        loop.execute { [self] in
            let reply: (Result<Void, LoginFailure>) -> Void = { result in caller.execute { done.value(result) } }
            let values = Dictionary(query, uniquingKeysWith: { first, _ in first })
            guard let state = values["state"], let pending = pendingLogins.removeValue(forKey: state),
                pending.expires > UnixTime.now()
            else {
                return reply(
                    .failure(
                        LoginFailure(
                            "The login could not be matched to one started here (unknown or expired state). Start again."
                        )))
            }
            if let error = values["error"] {
                let description = values["error_description"].map { ": \($0)" } ?? ""
                emit(.info, "login_refused", ["error": .string(error)])
                return reply(
                    .failure(LoginFailure("The authorization server said \(error)\(description).", code: error)))
            }
            guard let code = values["code"], let redirect = provider.redirectURI else {
                return reply(.failure(LoginFailure("The redirect carried no authorization code.")))
            }
            oauth.exchangeCode(code, verifier: pending.verifier, redirectURI: redirect.description) { [self] result in
                switch result {
                case .success(let tokens):
                    emit(.info, "logged_in", ["grant": .string("authorization_code")])
                    perform(lifecycle.loggedIn(tokens, now: UnixTime.now())) { reply(.success(())) }
                case .failure(let failure):
                    emit(.warning, "login_failed", ["reason": .string(failure.reason)])
                    // Published too: whoever watches /_platform/auth learns why no login came.
                    perform(lifecycle.loginFailed("the code exchange failed: \(failure.reason)"))
                    reply(.failure(LoginFailure("The code exchange failed: \(failure.reason).")))
                }
            }
        }
    }

    /// Starts an RFC 8628 device login and polls for its completion.
    public func deviceLogin(
        replyOn caller: EventLoop, _ done: @escaping (Result<DeviceAuthorization, OAuthFailure>) -> Void
    ) {
        let done = LoopBound(done, on: caller)
        loop.execute { [self] in
            oauth.authorizeDevice(scopes: provider.scopes) { [self] result in
                if case .success(let authorization) = result {
                    device = DeviceFlow(
                        deviceCode: authorization.deviceCode, interval: max(1, authorization.interval),
                        expires: UnixTime.now() + authorization.expiresIn)
                    perform(lifecycle.loginStarted())
                    scheduleDevicePoll()
                }
                caller.execute { done.value(result) }
            }
        }
    }

    private func scheduleDevicePoll() {
        guard let flow = device else { return }
        loop.schedule(at: loop.now.adding(seconds: flow.interval)) { [self] in
            guard let current = device, current.deviceCode == flow.deviceCode else { return }
            guard current.expires > UnixTime.now() else {
                device = nil
                emit(.warning, "device_login_expired")
                return perform(lifecycle.loginFailed("the device login expired before it was approved"))
            }
            oauth.pollDevice(current.deviceCode) { [self] result in
                guard device?.deviceCode == current.deviceCode else { return }
                switch result {
                case .success(let tokens):
                    device = nil
                    emit(.info, "logged_in", ["grant": .string("device_code")])
                    perform(lifecycle.loggedIn(tokens, now: UnixTime.now()))
                case .failure(.refused(let reason)) where reason.hasPrefix("authorization_pending"):
                    scheduleDevicePoll()
                case .failure(.refused(let reason)) where reason.hasPrefix("slow_down"):
                    device?.interval += 5  // RFC 8628 §3.5
                    scheduleDevicePoll()
                case .failure(.refused(let reason)):
                    device = nil
                    emit(.warning, "device_login_failed", ["reason": .string(reason)])
                    perform(lifecycle.loginFailed("the device login failed: \(reason)"))
                case .failure(.unavailable):
                    scheduleDevicePoll()
                }
            }
        }
    }

    /// Logs in with the configured demo token set (store reviewers, CI).
    public func demoLogin(replyOn caller: EventLoop, _ done: @escaping (Result<Void, LoginFailure>) -> Void) {
        let done = LoopBound(done, on: caller)
        guard let demo = provider.demo else {
            return caller.execute { done.value(.failure(LoginFailure("no demo tokens are configured"))) }
        }
        let tokenType = provider.tokenType
        // Secrets may live in files: read them on the worker, not on a loop.
        worker.submit { [self] in
            let result: Result<TokenSet, LoginFailure>
            do {
                let access = try demo.accessToken.resolveToken()
                let id = try demo.idToken?.resolveToken()
                result = .success(
                    TokenSet(
                        accessToken: access, idToken: id, refreshToken: nil, tokenType: tokenType,
                        expiresAt: UnixTime.now() + demo.expiresInSeconds, scope: nil))
            } catch {
                result = .failure(LoginFailure("\(error)"))
            }
            let sendable = LoopBound(result, on: loop)
            loop.execute { [self] in
                switch sendable.value {
                case .success(let tokens):
                    emit(.info, "logged_in", ["grant": .string("demo")])
                    perform(lifecycle.loggedIn(tokens, now: UnixTime.now())) {
                        caller.execute { done.value(.success(())) }
                    }
                case .failure(let failure):
                    caller.execute { done.value(.failure(failure)) }
                }
            }
        }
    }

    /// Revokes the refresh token when the provider can, forgets the tokens either way.
    public func logout(replyOn caller: EventLoop, _ done: @escaping (_ revoked: Bool) -> Void) {
        let done = LoopBound(done, on: caller)
        loop.execute { [self] in
            abandonJourneys()
            endJourneySession { [self] in
                let refresh = lifecycle.tokens?.refreshToken
                // The revocation is done here (not as a lifecycle action) so the caller hears when it ended.
                let actions = lifecycle.loggedOut().filter {
                    if case .revoke = $0 { return false } else { return true }
                }
                device = nil
                perform(actions)
                emit(.info, "logged_out")
                guard let refresh else { return caller.execute { done.value(false) } }
                oauth.revoke(refresh, hint: "refresh_token") { accepted in
                    self.emit(accepted ? .info : .warning, "token_revoked", ["accepted": .bool(accepted)])
                    caller.execute { done.value(accepted) }
                }
            }
        }
    }

    /// The provider's userinfo for the current login.
    public func userinfo(replyOn caller: EventLoop, _ done: @escaping (Result<FetchedResponse, OAuthFailure>) -> Void) {
        let done = LoopBound(done, on: caller)
        loop.execute { [self] in
            guard let tokens = lifecycle.tokens else {
                return caller.execute { done.value(.failure(.refused("not logged in"))) }
            }
            oauth.userinfo(accessToken: tokens.accessToken, tokenType: tokens.tokenType) { result in
                let sendable = LoopBound(result, on: caller)
                caller.execute { done.value(sendable.value) }
            }
        }
    }
}
