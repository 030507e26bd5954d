import JSON

/// An error the proxy answers itself: HTTP status, snake_case code and a human sentence.
/// A struct over a private enum so new errors are additive.
public struct ProxyError: Error, Sendable, Equatable {
    private enum Code: String, Sendable {
        case noRoute = "no_route"
        case hostNotAllowed = "host_not_allowed"
        case originNotAllowed = "origin_not_allowed"
        case proxyKeyRequired = "proxy_key_required"
        case mockNotFound = "mock_not_found"
        case mockUnreadable = "mock_unreadable"
        case invalidPath = "invalid_path"
        case methodNotAllowed = "method_not_allowed"
        case notReady = "not_ready"
        case upstreamUnreachable = "upstream_unreachable"
        case upstreamTimeout = "upstream_timeout"
        case tooManyRedirects = "too_many_redirects"
        case loopDetected = "loop_detected"
        case bodyTooLarge = "body_too_large"
        case invalidRequest = "invalid_request"
        case credentialsUnavailable = "credentials_unavailable"
        case hostMismatch = "host_mismatch"
        case awaitingAuthorization = "awaiting_authorization"
        case authServerUnavailable = "auth_server_unavailable"
        case loginUnavailable = "login_unavailable"
        case loginFailed = "login_failed"
        case notLoggedIn = "not_logged_in"
        case invalidAnalytics = "invalid_analytics"
        case shuttingDown = "shutting_down"
        case unknownOperation = "unknown_operation"
        case analyticsStoreFailed = "analytics_store_failed"
        case analyticsStoreFull = "analytics_store_full"
        case unknownExperiment = "unknown_experiment"
        case unknownVariant = "unknown_variant"
        case experimentsStateNotSaved = "experiments_state_not_saved"
        case journeyStepUnknown = "journey_step_unknown"
        case crossSiteRequest = "cross_site_request"
        case invalidTarget = "invalid_target"
        case hostRequired = "host_required"
        case analyticsTooLarge = "analytics_too_large"
        case unknownProvider = "unknown_provider"
        case mockNotAllowed = "mock_not_allowed"
        case tooManyLogins = "too_many_logins"
        case tooManyTunnels = "too_many_tunnels"
        case upgradeNotAllowed = "upgrade_not_allowed"
        case tunnelClosed = "tunnel_closed"
        case tokenExchangeRefused = "token_exchange_refused"
    }

    private let code: Code
    /// The HTTP status.
    public let status: Int
    /// The human sentence.
    public let message: String

    /// Where the gate sends the user (`awaiting_authorization` only).
    private var login: String?
    /// The provider the error is about, when it names one.
    public private(set) var provider: String?

    private init(_ code: Code, _ status: Int, _ message: String, login: String? = nil, provider: String? = nil) {
        self.code = code
        self.status = status
        self.message = message
        self.login = login
        self.provider = provider
    }

    /// The snake_case code.
    public var errorCode: String { code.rawValue }

    /// No route matches the path.
    public static func noRoute(_ path: String) -> Self { Self(.noRoute, 404, "No route matches \(path).") }
    /// The Host header names a host outside `allowedHosts`.
    public static let hostNotAllowed = Self(
        .hostNotAllowed, 403, "The Host header names a host this proxy does not serve.")
    /// The Origin header names an origin outside `allowedHosts`.
    public static let originNotAllowed = Self(.originNotAllowed, 403, "Requests from this origin are not allowed.")
    /// `apiKey` is set and `X-Proxy-Key` is missing or wrong.
    public static let proxyKeyRequired = Self(.proxyKeyRequired, 401, "A valid X-Proxy-Key header is required.")
    /// The mock file for the path does not exist.
    public static func mockNotFound(_ file: String) -> Self { Self(.mockNotFound, 404, "No mock file at \(file).") }
    /// The mock file exists but cannot be read.
    public static func mockUnreadable(_ file: String) -> Self {
        Self(.mockUnreadable, 500, "The mock file \(file) cannot be read.")
    }
    /// The path escapes its route (dot segments, encoded slashes).
    public static let invalidPath = Self(
        .invalidPath, 400, "The path contains dot segments, encoded separators or NUL.")
    /// The endpoint does not take this method; `allowed` also goes in the `Allow` header.
    public static func methodNotAllowed(_ allowed: String) -> Self {
        var error = Self(.methodNotAllowed, 405, "This endpoint accepts \(allowed) only.")
        error.allow = allowed
        return error
    }
    /// For 405: the methods for the `Allow` header.
    public private(set) var allow: String?
    /// The upstream could not be reached.
    public static let upstreamUnreachable = Self(.upstreamUnreachable, 502, "The upstream could not be reached.")
    /// The upstream did not answer in time.
    public static let upstreamTimeout = Self(.upstreamTimeout, 504, "The upstream did not answer in time.")
    /// More redirects than the route allows.
    public static let tooManyRedirects = Self(
        .tooManyRedirects, 502, "The upstream redirected more times than the route allows.")
    /// A hop (the route's upstream, or a redirect) that would connect to one of this proxy's own listeners.
    public static let loopDetected = Self(
        .loopDetected, 508,
        "The request would come back to this proxy: its upstream or a redirect names one of the proxy's own addresses.")
    /// The body exceeds `limits.maxBodyBytes`.
    public static let bodyTooLarge = Self(.bodyTooLarge, 413, "The request body is larger than the proxy accepts.")
    /// No login: credentialed routes are gated (docs/login.md, Gate).
    public static let awaitingAuthorization = Self(
        .awaitingAuthorization, 401, "Sign in first: open /_platform/login.",
        login: "/_platform/login")
    /// The route's provider (one of several) has no login: its login URL names it.
    public static func awaitingAuthorization(provider: String) -> Self {
        let login = "/_platform/login?provider=\(provider)"
        return Self(
            .awaitingAuthorization, 401, "Sign in to \(provider) first: open \(login).", login: login,
            provider: provider)
    }
    /// A `provider` parameter that names no configured provider.
    public static func unknownProvider(_ name: String, known: [String]) -> Self {
        let list = known.isEmpty ? "none is configured" : "configured: \(known.joined(separator: ", "))"
        return Self(.unknownProvider, 404, "No provider is named \(name) (\(list)).", provider: name)
    }
    /// The auth server could not refresh the tokens; the login is kept.
    public static func authServerUnavailable(_ reason: String) -> Self {
        Self(
            .authServerUnavailable, 503,
            "The auth server is unavailable (\(reason)); the login is kept and the refresh retried.")
    }
    /// The auth server refused the route's RFC 8693 token exchange: the request is not sent
    /// (the provider's own token never goes to the route's upstream instead).
    public static func tokenExchangeRefused(_ reason: String) -> Self {
        Self(
            .tokenExchangeRefused, 502,
            "The auth server refused the token exchange for this route (\(reason)); the request was not sent upstream.")
    }
    /// The auth server could not be reached to start a login; nothing changed.
    public static func loginServerUnavailable(_ reason: String) -> Self {
        Self(
            .authServerUnavailable, 503,
            "The auth server could not be reached to start the login (\(reason)); nothing changed, try again later.")
    }
    /// The auth server could not be reached for a request on behalf of the login (userinfo).
    public static func authServerUnreachable(_ reason: String) -> Self {
        Self(.authServerUnavailable, 503, "The auth server could not be reached (\(reason)); the login is kept.")
    }
    /// This provider or grant offers no such login.
    public static func loginUnavailable(_ reason: String) -> Self { Self(.loginUnavailable, 404, reason) }
    /// A browser login was not started: as many as the provider keeps are in progress.
    public static func tooManyLogins(_ reason: String, retryAfterSeconds: Double) -> Self {
        var error = Self(.tooManyLogins, 429, reason)
        error.retryAfter = max(1, Int(retryAfterSeconds.rounded(.up)))
        return error
    }
    /// A login attempt failed.
    public static func loginFailed(_ reason: String) -> Self { Self(.loginFailed, 400, reason) }
    /// The action needs a login.
    public static let notLoggedIn = Self(.notLoggedIn, 409, "There is no login.")
    /// Analytics values need a subject: nothing is recorded while logged out.
    public static let notLoggedInForAnalytics = Self(
        .notLoggedIn, 409, "Nothing is recorded while logged out: there is no subject to attribute it to.")

    /// Logged in, but the id_token that names the user is missing (a static provider without
    /// `idToken`, a login whose provider issued none).
    public static let noSubjectForAnalytics = Self(
        .notLoggedIn, 409,
        "Nothing is recorded without a subject: the provider's tokens hold no id_token (give a static provider an idToken)."
    )
    /// An analytics request that breaks the key or body rules; `index` names the offending event.
    public static func invalidAnalytics(_ message: String, index: Int?) -> Self {
        Self(.invalidAnalytics, 400, index.map { "events[\($0)]: \(message)" } ?? message)
    }
    /// The proxy is stopping.
    public static let shuttingDown = Self(.shuttingDown, 503, "The proxy is shutting down.")

    /// A tunnel cap (per process or per client, `limits.maxTunnels*`) is reached.
    public static let tooManyTunnels = Self(.tooManyTunnels, 503, "Too many tunnels are open; try again later.")

    /// An `Upgrade` the route does not tunnel (its `upgrades`), or one mock replay or record cannot carry.
    public static func upgradeNotAllowed(_ reason: String) -> Self { Self(.upgradeNotAllowed, 400, reason) }

    /// The tunnel was withdrawn (logout, reload, shutdown) before it opened.
    public static func tunnelClosed(_ reason: String) -> Self {
        Self(.tunnelClosed, 503, "The tunnel was closed before it opened (\(reason)).")
    }
    /// No running operation matches.
    public static func unknownOperation(_ name: String) -> Self {
        Self(.unknownOperation, 404, "No operation \(name) is running on that path or above it.")
    }
    /// The analytics store could not commit.
    public static let analyticsStoreFailed = Self(
        .analyticsStoreFailed, 500, "The analytics store could not commit the values; nothing was acknowledged.")
    /// An experiment override could not be written to the state file.
    public static let experimentsStateNotSaved = Self(
        .experimentsStateNotSaved, 500,
        "The override is in force but could not be saved; it is lost when the proxy stops (the log has the reason).")
    /// The analytics store's disk is full (507 Insufficient Storage, `Retry-After: 30`).
    public static var analyticsStoreFull: Self {
        var error = Self(
            .analyticsStoreFull, 507,
            "The disk holding the analytics store is full; nothing was acknowledged. Retry later.")
        error.retryAfter = 30
        return error
    }
    /// Seconds for the `Retry-After` header, when the condition is expected to pass (429, 507).
    public private(set) var retryAfter: Int?
    /// A browser marked the request as coming from another site (`Sec-Fetch-Site`).
    public static let crossSiteRequest = Self(.crossSiteRequest, 403, "Requests from another site are not allowed.")
    /// An absolute-form target with user information (`http://a@b/`): which host is meant is ambiguous.
    public static let userinfoInTarget = Self(
        .invalidTarget, 400, "The request target must not carry user information (user@host).")
    /// An HTTP/1.0 request without Host (and no absolute-form target) on a credentialed route.
    public static let hostRequired = Self(.hostRequired, 400, "A Host header is required on this route.")
    /// An analytics request larger than its limits; `index` names the offending event.
    public static func analyticsTooLarge(_ message: String, index: Int?) -> Self {
        Self(.analyticsTooLarge, 413, index.map { "events[\($0)]: \(message)" } ?? message)
    }
    /// An absolute-form target names another host than the Host header.
    public static let hostMismatch = Self(
        .hostMismatch, 400, "The request target and the Host header name different hosts.")
    /// The route needs a token the proxy does not have.
    public static func credentialsUnavailable(_ kind: String) -> Self {
        Self(
            .credentialsUnavailable, 503,
            "No \(kind) credential is available for this route (why: /_platform/auth, lastError).")
    }
    /// No experiment has that name.
    public static func unknownExperiment(_ name: String) -> Self {
        Self(.unknownExperiment, 404, "No experiment is named \(name).")
    }
    /// The experiment has no such variant.
    public static func unknownVariant(_ variant: String, experiment: String, known: [String]) -> Self {
        Self(
            .unknownVariant, 400,
            "The experiment \(experiment) has no variant \(variant); its variants are \(known.joined(separator: ", "))."
        )
    }
    /// A journey step id that is unknown, spent, expired or another client's.
    public static let journeyStepUnknown = Self(
        .journeyStepUnknown, 404,
        "This journey step is unknown, was already answered, has expired or belongs to another client. Start the journey again."
    )
    /// A request the proxy cannot act on, with a reason.
    public static func invalidRequest(_ message: String) -> Self { Self(.invalidRequest, 400, message) }

    /// The `release` profile serves no mock data: the run-time switch may only turn mocks off.
    public static let mockNotAllowed = Self(
        .mockNotAllowed, 403,
        "The release profile serves no mock data: a route's mock can only be switched off.")

    /// The JSON body `{"error":…,"message":…,"requestID":…}`.
    public func body(requestID: String) -> [UInt8] {
        // The gate tells apps where to send the user.
        var extra = login.map { ",\"login\":\(jsonQuoted($0))" } ?? ""
        if let provider { extra += ",\"provider\":\(jsonQuoted(provider))" }
        return Array(
            "{\"error\":\"\(code.rawValue)\",\"message\":\(jsonQuoted(message))\(extra),\"requestID\":\(jsonQuoted(requestID))}"
                .utf8)
    }
}
