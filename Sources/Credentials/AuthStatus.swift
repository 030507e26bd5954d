/// The login state apps see at `/_platform/auth` and on its event stream.
public enum AuthState: String, Sendable, Equatable, CaseIterable {
    /// Usable tokens.
    case loggedIn = "logged_in"
    /// No login (never logged in, or logged out).
    case loggedOut = "logged_out"
    /// The auth server refused the tokens: a new login is needed.
    case awaitingAuthorization = "awaiting_authorization"
    /// A refresh is under way (the current tokens stay in use meanwhile).
    case refreshing
}

/// What `/_platform/auth` reports; never holds a secret.
public struct AuthStatus: Sendable, Equatable {
    /// The state.
    public var state: AuthState
    /// When the access token expires (Unix seconds), if known.
    public var expiresAt: Double?
    /// The subject (`pennkey`, else `sub`, of the id_token), if known.
    public var subject: String?
    /// The last refresh or login problem, cleared by success.
    public var lastError: String?

    /// Creates a status.
    public init(state: AuthState, expiresAt: Double? = nil, subject: String? = nil, lastError: String? = nil) {
        self.state = state
        self.expiresAt = expiresAt
        self.subject = subject
        self.lastError = lastError
    }

    /// Whether requests can carry credentials. Inlinable: every forwarded request asks, and
    /// called from another module a snapshot's status was copied for it (its strings retained).
    @inlinable
    public var loggedIn: Bool { state == .loggedIn || state == .refreshing }
}
