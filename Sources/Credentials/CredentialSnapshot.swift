import Config

/// The tokens requests use, as one immutable value per token generation. Loops hold a
/// reference and get a new one pushed when tokens change, so requests never take a lock.
/// Header values are formatted once here, not per request.
public final class CredentialSnapshot: Sendable {
    /// Increases with every change of tokens; 0 means no tokens were ever loaded.
    public let generation: UInt64
    /// `"<type> <access token>"`, or nil when there is no access token.
    public let accessTokenValue: String?
    /// `"<type> <id_token>"`, or nil when there is no id_token.
    public let idTokenValue: String?
    /// The access token alone (no type), as bytes, when it is sent at all.
    public let accessTokenBytes: [UInt8]?
    /// The id_token alone, as bytes, when it is sent at all.
    public let idTokenBytes: [UInt8]?
    /// The login state that goes with these tokens.
    public let status: AuthStatus
    /// The analytics subject (`pennkey`, else `sub`), if known.
    public var subject: String? { status.subject }

    /// Why the provider cannot be used (discovery failed), if so.
    public let providerProblem: String?
    /// When these tokens were obtained (Unix seconds); nil when unknown.
    public let obtainedAt: Double?

    /// A snapshot of `accessToken` / `idToken` with `tokenType` (normally `Bearer`).
    public init(
        generation: UInt64, accessToken: String?, idToken: String?, tokenType: String, status: AuthStatus? = nil,
        providerProblem: String? = nil, obtainedAt: Double? = nil
    ) {
        self.generation = generation
        self.obtainedAt = obtainedAt
        self.providerProblem = providerProblem
        // A token or type with anything but visible ASCII (a NUL from a UTF-16 file, CR/LF from a
        // broken IdP) could split or forge header lines upstream: such a token is never sent.
        let usableType = SecretSource.isHeaderToken(tokenType) && !tokenType.isEmpty
        accessTokenValue = accessToken.flatMap {
            usableType && SecretSource.isHeaderToken($0) ? "\(tokenType) \($0)" : nil
        }
        idTokenValue = idToken.flatMap { usableType && SecretSource.isHeaderToken($0) ? "\(tokenType) \($0)" : nil }
        accessTokenBytes = accessTokenValue == nil ? nil : accessToken.map { Array($0.utf8) }
        idTokenBytes = idTokenValue == nil ? nil : idToken.map { Array($0.utf8) }
        self.status = status ?? AuthStatus(state: accessToken == nil ? .loggedOut : .loggedIn)
    }

    /// The same snapshot as an object of its own, for one event loop: every loop retains its
    /// snapshot per request, and a shared object would have its count written from every core
    /// (docs/performance.md, "Nothing shared is written").
    public func privateCopy() -> CredentialSnapshot { CredentialSnapshot(copying: self) }

    private init(copying other: CredentialSnapshot) {
        generation = other.generation
        accessTokenValue = other.accessTokenValue
        idTokenValue = other.idTokenValue
        accessTokenBytes = other.accessTokenBytes
        idTokenBytes = other.idTokenBytes
        status = other.status
        providerProblem = other.providerProblem
        obtainedAt = other.obtainedAt
    }

    /// No tokens at all.
    public static let empty = CredentialSnapshot(generation: 0, accessToken: nil, idToken: nil, tokenType: "Bearer")

    /// Whether the access token's expiry has passed at `now` (Unix seconds).
    public func isExpired(now: Double) -> Bool { status.expiresAt.map { $0 <= now } ?? false }

    /// The token a route of `kind` injects, without its type, or nil.
    public func tokenBytes(for kind: CredentialKind) -> [UInt8]? {
        switch kind {
        case .accessToken: accessTokenBytes
        case .jwt: idTokenBytes
        case .none: nil
        }
    }

    /// The header value a route of `kind` injects, or nil if that token is missing (or kind is `none`).
    public func value(for kind: CredentialKind) -> String? {
        switch kind {
        case .accessToken: accessTokenValue
        case .jwt: idTokenValue
        case .none: nil
        }
    }
}
