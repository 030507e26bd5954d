import Config
import EventLoop
import JSON
import Upstream

/// Why an auth-server call failed, classified like an OIDC SDK's ErrorNode / FailureNode.
public enum OAuthFailure: Error, Sendable, Equatable {
    /// The server answered with an OAuth error (RFC 6749 §5.2, e.g. `invalid_grant`): the
    /// reason, `error` first, never a token.
    case refused(String)
    /// The server could not be reached, timed out, answered 5xx or a 4xx that is not an OAuth
    /// error (an HTML 404 from a moved endpoint): worth retrying.
    case unavailable(String)
}

/// What a token-endpoint call learned besides its result.
struct TokenCallNotes: Sendable, Equatable {
    /// The refresh token the answer carried, also when the rest of it was unusable: the
    /// provider may have rotated the grant, and the old refresh token may be spent.
    var refreshToken: String?
    /// Whether no HTTP answer came (timeout, reset): the provider may have acted all the same.
    var answerLost = false
}

/// RFC 8628 device authorization response.
public struct DeviceAuthorization: Sendable, Equatable {
    /// Polled at the token endpoint.
    public var deviceCode: String
    /// Shown to the user.
    public var userCode: String
    /// Where the user enters the code.
    public var verificationURI: String
    /// The URI with the code filled in, when offered.
    public var verificationURIComplete: String?
    /// Seconds until the codes expire.
    public var expiresIn: Double
    /// Seconds between polls.
    public var interval: Double
}

/// Token endpoint, revocation, userinfo and discovery calls, on one loop through libcurl.
final class OAuthClient {
    private let http: UpstreamClient
    /// The client's credentials per request (`tokenEndpointAuthMethod`).
    private let authenticator: ClientAuthenticator
    /// The provider's TLS settings on every call; nil: the defaults.
    private let tls: UpstreamTLS?
    /// RFC 8707 `resource` and `audience` parameters, sent with every grant's token request.
    private let audienceForm: [(String, String)]
    private let now: () -> Double
    var endpoints: ProviderEndpoints
    /// The endpoints written in the config, which discovery fills in (again on each re-read).
    private let configured: ProviderEndpoints
    static let timeout = 10.0

    init(http: UpstreamClient, provider: ProviderConfiguration, clientSecret: String?, now: @escaping () -> Double) {
        self.http = http
        authenticator = ClientAuthenticator(provider: provider, clientSecret: clientSecret)
        tls = provider.tls.map { UpstreamTLS(configured: $0) }
        audienceForm = provider.resource.map { ("resource", $0) } + (provider.audience.map { [("audience", $0)] } ?? [])
        self.now = now
        configured = ProviderEndpoints(configured: provider)
        endpoints = configured
    }

    // MARK: grants

    /// A refresh; the notes carry a rotated refresh token even when the answer is unusable.
    func refresh(
        _ refreshToken: String, scopes: [String]?,
        completion: @escaping (Result<TokenSet, OAuthFailure>, TokenCallNotes) -> Void
    ) {
        tokenCall(
            [("grant_type", "refresh_token"), ("refresh_token", refreshToken)] + audienceForm, completion: completion)
    }

    func clientCredentials(scopes: [String], completion: @escaping (Result<TokenSet, OAuthFailure>) -> Void) {
        var form = [("grant_type", "client_credentials")]
        if !scopes.isEmpty { form.append(("scope", scopes.joined(separator: " "))) }
        tokenRequest(form + audienceForm, completion: completion)
    }

    func exchangeCode(
        _ code: String, verifier: String, redirectURI: String,
        completion: @escaping (Result<TokenSet, OAuthFailure>) -> Void
    ) {
        tokenRequest(
            [
                ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", redirectURI),
                ("code_verifier", verifier),
            ] + audienceForm, completion: completion)
    }

    func pollDevice(_ deviceCode: String, completion: @escaping (Result<TokenSet, OAuthFailure>) -> Void) {
        tokenRequest(
            [("grant_type", "urn:ietf:params:oauth:grant-type:device_code"), ("device_code", deviceCode)]
                + audienceForm,
            completion: completion)
    }

    func authorizeDevice(scopes: [String], completion: @escaping (Result<DeviceAuthorization, OAuthFailure>) -> Void) {
        guard let url = endpoints.deviceAuthorization else {
            return completion(.failure(.refused("the provider has no device authorization endpoint")))
        }
        post(url, form: [("scope", scopes.joined(separator: " "))]) { result in
            completion(
                result.flatMap { body in
                    guard let json = try? JSONValue.parse(body), let deviceCode = json["device_code"]?.stringValue,
                        let userCode = json["user_code"]?.stringValue,
                        let uri = (json["verification_uri"] ?? json["verification_url"])?.stringValue
                    else {
                        return .failure(.unavailable("the device authorization response is malformed"))
                    }
                    return .success(
                        DeviceAuthorization(
                            deviceCode: deviceCode, userCode: userCode, verificationURI: uri,
                            verificationURIComplete: json["verification_uri_complete"]?.stringValue,
                            expiresIn: json["expires_in"]?.doubleValue ?? 600,
                            interval: json["interval"]?.doubleValue ?? 5))
                })
        }
    }

    /// RFC 7009: best effort; the result only says whether the server accepted.
    func revoke(_ token: String, hint: String, completion: @escaping (Bool) -> Void) {
        guard let url = endpoints.revocation else { return completion(false) }
        post(url, form: [("token", token), ("token_type_hint", hint)]) { completion((try? $0.get()) != nil) }
    }

    func userinfo(
        accessToken: String, tokenType: String, completion: @escaping (Result<FetchedResponse, OAuthFailure>) -> Void
    ) {
        guard let url = endpoints.userinfo else {
            return completion(.failure(.refused("the provider has no userinfo endpoint")))
        }
        var request = UpstreamRequest(
            method: "GET", url: url.description,
            headers: ["Authorization: \(tokenType) \(accessToken)", "Accept: application/json"],
            hasBody: false, bodyLength: nil, timeout: Self.timeout)
        request.tls = tls
        http.fetch(request, body: nil) { result in
            switch result {
            case .success(let response): completion(.success(response))
            case .failure(let error): completion(.failure(.unavailable(error.detail)))
            }
        }
    }

    func discover(_ url: UpstreamURL, completion: @escaping (Result<ProviderEndpoints, OAuthFailure>) -> Void) {
        var request = UpstreamRequest(
            method: "GET", url: url.description, headers: ["Accept: application/json"],
            hasBody: false, bodyLength: nil, timeout: Self.timeout)
        request.tls = tls
        http.fetch(request, body: nil) { [configured] result in
            switch result {
            case .failure(let error): completion(.failure(.unavailable(error.detail)))
            case .success(let response) where response.status != 200:
                completion(.failure(.unavailable("discovery answered HTTP \(response.status)")))
            case .success(let response):
                guard let filled = configured.filled(fromDiscovery: response.body) else {
                    return completion(.failure(.unavailable("the discovery document is not a JSON object")))
                }
                completion(.success(filled))
            }
        }
    }

    /// RFC 8693 token exchange: `subjectToken` (the provider's access token) for an access token
    /// meant for `target`'s audience, resources and scope.
    func exchange(
        subjectToken: String, for target: TokenExchangeConfiguration,
        completion: @escaping (Result<TokenSet, OAuthFailure>) -> Void
    ) {
        var form = [
            ("grant_type", TokenExchangeGrant.grantType), ("subject_token", subjectToken),
            ("subject_token_type", TokenExchangeGrant.accessTokenType),
            ("requested_token_type", TokenExchangeGrant.accessTokenType),
        ]
        if let audience = target.audience { form.append(("audience", audience)) }
        form += target.resource.map { ("resource", $0) }
        if !target.scope.isEmpty { form.append(("scope", target.scope.joined(separator: " "))) }
        tokenRequest(form, completion: completion)
    }

    // MARK: transport

    private func tokenRequest(
        _ form: [(String, String)], completion: @escaping (Result<TokenSet, OAuthFailure>) -> Void
    ) {
        tokenCall(form) { result, _ in completion(result) }
    }

    private func tokenCall(
        _ form: [(String, String)], completion: @escaping (Result<TokenSet, OAuthFailure>, TokenCallNotes) -> Void
    ) {
        guard let url = endpoints.token else {
            return completion(.failure(.unavailable("the token endpoint is not known yet")), TokenCallNotes())
        }
        let now = self.now
        post(url, form: form, answerLost: { completion(.failure(.unavailable($0)), TokenCallNotes(answerLost: true)) })
        { result in
            var notes = TokenCallNotes()
            completion(
                result.flatMap { body in
                    guard let json = try? JSONValue.parse(body) else {
                        return .failure(.unavailable("the token response is not JSON"))
                    }
                    notes.refreshToken = json["refresh_token"]?.stringValue.flatMap { $0.isEmpty ? nil : $0 }
                    return TokenSet.fromTokenResponse(json, now: now()).mapError { .unavailable($0.description) }
                }, notes)
        }
    }

    /// POSTs a form with the client's credentials (`ClientAuthenticator`: HTTP Basic, form
    /// parameters or a client assertion; a client certificate through `tls`) and classifies the
    /// answer: 2xx body; a 4xx with an OAuth error body (RFC 6749 §5.2) refused; anything else
    /// (5xx, 408, 429, an HTML 404) or no answer unavailable.
    /// `answerLost`, when given, takes the no-answer case instead of `completion`.
    private func post(
        _ url: UpstreamURL, form: [(String, String)], answerLost: ((String) -> Void)? = nil,
        completion: @escaping (Result<[UInt8], OAuthFailure>) -> Void
    ) {
        var headers = ["Content-Type: application/x-www-form-urlencoded", "Accept: application/json"]
        // The assertion's audience is the token endpoint, also on revocation and device calls (RFC 7523 §3).
        let audience = (endpoints.token ?? url).description
        let credentials: (headers: [String], form: [(String, String)])
        switch authenticator.credentials(tokenEndpoint: audience, now: now()) {
        case .success(let made): credentials = made
        case .failure(let failure): return completion(.failure(failure))
        }
        headers += credentials.headers
        let sent = form + credentials.form
        // Taken out of an error text that quotes them.
        let secrets = SecretRedaction.secrets(of: sent) + [authenticator.clientSecret ?? ""].filter { !$0.isEmpty }
        let body = Array(FormEncoding.encode(sent).utf8)
        var request = UpstreamRequest(
            method: "POST", url: url.description, headers: headers, hasBody: true,
            bodyLength: body.count, timeout: Self.timeout)
        request.tls = tls
        http.fetch(request, body: body) { result in
            switch result {
            case .failure(let error):
                if let answerLost { return answerLost(error.detail) }
                completion(.failure(.unavailable(error.detail)))
            case .success(let response) where (200...299).contains(response.status):
                completion(.success(response.body))
            case .success(let response)
            where (400...499).contains(response.status) && ![408, 429].contains(response.status):
                // Only the server's OAuth answer is a refusal: a proxy's or router's error page
                // (a moved endpoint's 404) says nothing about the grant.
                guard let parsed = OAuthErrorBody.parse(response.body) else {
                    return completion(.failure(.unavailable("HTTP \(response.status) without an OAuth error body")))
                }
                let reason = parsed.description.map { "\(parsed.error): \($0)" } ?? parsed.error
                completion(.failure(OAuthFailure.refused(reason).redacting(secrets)))
            case .success(let response):
                completion(.failure(.unavailable("HTTP \(response.status)")))
            }
        }
    }
}
