import Config
import JSON

/// One request to AM, built by `JourneyClient`; the owner sends it through libcurl.
public struct JourneyRequest: Sendable, Equatable {
    /// `GET` or `POST`.
    public var method: String
    /// The absolute URL.
    public var url: String
    /// Header lines `Name: value` (the session cookie among them: never log these).
    public var headers: [String]
    /// The body, for POST.
    public var body: [UInt8]?
}

/// The requests the Journey SDK makes, as values: authenticate, authorize with the session,
/// session logout. Pure: no I/O, no clock, no randomness.
public struct JourneyClient: Sendable, Equatable {
    /// The tree and server.
    public let config: JourneyConfiguration
    /// The OAuth client the tokens are for.
    public let clientID: String
    /// The redirect URI registered for it; AM puts the code on it.
    public let redirectURI: String
    /// Scopes requested at authorize.
    public let scopes: [String]
    /// The authorize endpoint (AM's own unless configured).
    public let authorizeURL: UpstreamURL

    /// A client for one configured journey provider.
    public init(
        config: JourneyConfiguration, clientID: String, redirectURI: String, scopes: [String], authorizeURL: UpstreamURL
    ) {
        self.config = config
        self.clientID = clientID
        self.redirectURI = redirectURI
        self.scopes = scopes
        self.authorizeURL = authorizeURL
    }

    /// The API version AM's authenticate endpoint is spoken at (as the Journey SDKs send it).
    static let authenticateVersion = "Accept-API-Version: resource=2.1, protocol=1.0"
    /// The API version of the sessions endpoint.
    static let sessionsVersion = "Accept-API-Version: resource=3.1, protocol=1.0"

    /// `POST …/authenticate`: `{}` starts `journey`, a step with inputs filled continues it; a
    /// `suspendedId` resumes a suspended journey; `session` is sent as the tenant's cookie.
    public func authenticate(journey: String?, body: JSONValue, suspendedId: String? = nil, session: String? = nil)
        -> JourneyRequest
    {
        var query: [(String, String)] = []
        if let journey { query += [("authIndexType", "service"), ("authIndexValue", journey)] }
        if let suspendedId { query.append(("suspendedId", suspendedId)) }
        if config.forceAuth { query.append(("ForceAuth", "true")) }
        if config.noSession { query.append(("noSession", "true")) }
        let url = config.url(
            "/json" + config.realmPath + "/authenticate", query: query.isEmpty ? nil : FormEncoding.encode(query))
        var headers = [
            "Content-Type: application/json", "Accept: application/json", Self.authenticateVersion,
            "X-Requested-With: forgerock-sdk",
        ]
        if let session { headers.append(cookie(session)) }
        return JourneyRequest(method: "POST", url: url.description, headers: headers, body: body.serializedBytes())
    }

    /// `GET …/authorize` with the session cookie, PKCE S256 and `response_type=code`: AM answers
    /// 302 to the redirect URI with the code (read from `Location`, never followed).
    public func authorize(session: String, pkce: PKCE, state: String, nonce: String) -> JourneyRequest {
        let query = FormEncoding.encode([
            ("client_id", clientID), ("response_type", "code"), ("redirect_uri", redirectURI),
            ("scope", scopes.joined(separator: " ")), ("state", state), ("nonce", nonce),
            ("code_challenge", pkce.challenge), ("code_challenge_method", PKCE.method),
        ])
        let url = authorizeURL.description + (authorizeURL.query == nil ? "?" : "&") + query
        return JourneyRequest(
            method: "GET", url: url, headers: ["Accept: application/json", cookie(session)], body: nil)
    }

    /// `POST …/sessions?_action=logout`: ends the AM session (cookie and the tenant's header, as the iOS SDK sends).
    public func logout(session: String) -> JourneyRequest {
        let url = config.url("/json" + config.realmPath + "/sessions", query: "_action=logout")
        return JourneyRequest(
            method: "POST", url: url.description,
            headers: [
                "Content-Type: application/json", "Accept: application/json", Self.sessionsVersion,
                cookie(session), "\(config.cookieName): \(session)",
            ],
            body: Array("{}".utf8))
    }

    private func cookie(_ session: String) -> String { "Cookie: \(config.cookieName)=\(session)" }

    /// What the authorize redirect carried.
    public enum Redirect: Sendable, Equatable {
        /// The code, for the token exchange.
        case code(String)
        /// AM refused: `error` and its description.
        case refused(String)
        /// Not a redirect to our URI with a matching state.
        case invalid(String)
    }

    /// Reads the authorize answer: a 302 whose `Location` is the redirect URI with `code` and our `state`.
    public func redirect(status: Int, location: String?, state: String) -> Redirect {
        guard (300...399).contains(status), let location else {
            return .invalid(
                "AM answered the authorize request with HTTP \(status), not a redirect (no valid session, or consent is required)"
            )
        }
        guard location.hasPrefix(redirectURI) else {
            return .invalid("AM redirected somewhere else than the redirect URI (no valid session?)")
        }
        let query =
            location.split(separator: "?", maxSplits: 1).dropFirst().first.map { $0.split(separator: "#").first ?? "" }
            ?? ""
        let values = Dictionary(FormEncoding.decodeQuery(query), uniquingKeysWith: { first, _ in first })
        if let error = values["error"] {
            return .refused(values["error_description"].map { "\(error): \($0)" } ?? error)
        }
        guard values["state"] == state else { return .invalid("the authorize redirect's state does not match") }
        guard let code = values["code"], !code.isEmpty else {
            return .invalid("the authorize redirect carries no code")
        }
        return .code(code)
    }
}
