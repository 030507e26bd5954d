import Config
import EventLoop
import JSON
import Upstream

/// Why an auth-server call failed, classified like an OIDC SDK's ErrorNode / FailureNode.
public enum OAuthFailure: Error, Sendable, Equatable {
    /// The server answered and refused (4xx, e.g. `invalid_grant`): the reason, never a token.
    case refused(String)
    /// The server could not be reached, timed out or answered 5xx: worth retrying.
    case unavailable(String)
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
    private let clientID: String?
    private let clientSecret: String?
    private let now: () -> Double
    var endpoints: ProviderEndpoints
    static let timeout = 10.0

    init(http: UpstreamClient, provider: ProviderConfiguration, clientSecret: String?, now: @escaping () -> Double) {
        self.http = http
        clientID = provider.clientID
        self.clientSecret = clientSecret
        self.now = now
        endpoints = ProviderEndpoints(configured: provider)
    }

    // MARK: grants

    func refresh(_ refreshToken: String, scopes: [String]?, completion: @escaping (Result<TokenSet, OAuthFailure>) -> Void) {
        tokenRequest([("grant_type", "refresh_token"), ("refresh_token", refreshToken)], completion: completion)
    }

    func clientCredentials(scopes: [String], completion: @escaping (Result<TokenSet, OAuthFailure>) -> Void) {
        var form = [("grant_type", "client_credentials")]
        if !scopes.isEmpty { form.append(("scope", scopes.joined(separator: " "))) }
        tokenRequest(form, completion: completion)
    }

    func exchangeCode(_ code: String, verifier: String, redirectURI: String, completion: @escaping (Result<TokenSet, OAuthFailure>) -> Void) {
        tokenRequest([("grant_type", "authorization_code"), ("code", code), ("redirect_uri", redirectURI),
                      ("code_verifier", verifier)], completion: completion)
    }

    func pollDevice(_ deviceCode: String, completion: @escaping (Result<TokenSet, OAuthFailure>) -> Void) {
        tokenRequest([("grant_type", "urn:ietf:params:oauth:grant-type:device_code"), ("device_code", deviceCode)],
                     completion: completion)
    }

    func authorizeDevice(scopes: [String], completion: @escaping (Result<DeviceAuthorization, OAuthFailure>) -> Void) {
        guard let url = endpoints.deviceAuthorization else { return completion(.failure(.refused("the provider has no device authorization endpoint"))) }
        var form = [("scope", scopes.joined(separator: " "))]
        if clientSecret == nil, let clientID { form.append(("client_id", clientID)) }
        post(url, form: form) { result in
            completion(result.flatMap { body in
                guard let json = try? JSONValue.parse(body), let deviceCode = json["device_code"]?.stringValue,
                      let userCode = json["user_code"]?.stringValue,
                      let uri = (json["verification_uri"] ?? json["verification_url"])?.stringValue else {
                    return .failure(.unavailable("the device authorization response is malformed"))
                }
                return .success(DeviceAuthorization(
                    deviceCode: deviceCode, userCode: userCode, verificationURI: uri,
                    verificationURIComplete: json["verification_uri_complete"]?.stringValue,
                    expiresIn: json["expires_in"]?.doubleValue ?? 600, interval: json["interval"]?.doubleValue ?? 5))
            })
        }
    }

    /// RFC 7009: best effort; the result only says whether the server accepted.
    func revoke(_ token: String, hint: String, completion: @escaping (Bool) -> Void) {
        guard let url = endpoints.revocation else { return completion(false) }
        var form = [("token", token), ("token_type_hint", hint)]
        if clientSecret == nil, let clientID { form.append(("client_id", clientID)) }
        post(url, form: form) { completion((try? $0.get()) != nil) }
    }

    func userinfo(accessToken: String, tokenType: String, completion: @escaping (Result<FetchedResponse, OAuthFailure>) -> Void) {
        guard let url = endpoints.userinfo else { return completion(.failure(.refused("the provider has no userinfo endpoint"))) }
        let request = UpstreamRequest(method: "GET", url: url.description,
                                      headers: ["Authorization: \(tokenType) \(accessToken)", "Accept: application/json"],
                                      hasBody: false, bodyLength: nil, timeout: Self.timeout)
        http.fetch(request, body: nil) { result in
            switch result {
            case .success(let response): completion(.success(response))
            case .failure(let error): completion(.failure(.unavailable(error.detail)))
            }
        }
    }

    func discover(_ url: UpstreamURL, completion: @escaping (Result<ProviderEndpoints, OAuthFailure>) -> Void) {
        let request = UpstreamRequest(method: "GET", url: url.description, headers: ["Accept: application/json"],
                                      hasBody: false, bodyLength: nil, timeout: Self.timeout)
        http.fetch(request, body: nil) { [endpoints] result in
            switch result {
            case .failure(let error): completion(.failure(.unavailable(error.detail)))
            case .success(let response) where response.status != 200:
                completion(.failure(.unavailable("discovery answered HTTP \(response.status)")))
            case .success(let response):
                guard let filled = endpoints.filled(fromDiscovery: response.body) else {
                    return completion(.failure(.unavailable("the discovery document is not a JSON object")))
                }
                completion(.success(filled))
            }
        }
    }

    // MARK: transport

    private func tokenRequest(_ form: [(String, String)], completion: @escaping (Result<TokenSet, OAuthFailure>) -> Void) {
        guard let url = endpoints.token else { return completion(.failure(.unavailable("the token endpoint is not known yet"))) }
        var form = form
        if clientSecret == nil, let clientID { form.append(("client_id", clientID)) }
        let now = self.now
        post(url, form: form) { result in
            completion(result.flatMap { body in
                guard let json = try? JSONValue.parse(body) else { return .failure(.unavailable("the token response is not JSON")) }
                return TokenSet.fromTokenResponse(json, now: now()).mapError { .unavailable($0.description) }
            })
        }
    }

    /// POSTs a form with the client's credentials (HTTP Basic when it has a secret, RFC 6749
    /// §2.3.1) and classifies the answer: 2xx body, 4xx refused, 5xx or no answer unavailable.
    private func post(_ url: UpstreamURL, form: [(String, String)], completion: @escaping (Result<[UInt8], OAuthFailure>) -> Void) {
        var headers = ["Content-Type: application/x-www-form-urlencoded", "Accept: application/json"]
        if let clientID, let clientSecret {
            let pair = FormEncoding.percentEncode(clientID) + ":" + FormEncoding.percentEncode(clientSecret)
            headers.append("Authorization: Basic " + Base64.encode(Array(pair.utf8)))
        }
        let body = Array(FormEncoding.encode(form).utf8)
        let request = UpstreamRequest(method: "POST", url: url.description, headers: headers, hasBody: true,
                                      bodyLength: body.count, timeout: Self.timeout)
        http.fetch(request, body: body) { result in
            switch result {
            case .failure(let error):
                completion(.failure(.unavailable(error.detail)))
            case .success(let response) where (200...299).contains(response.status):
                completion(.success(response.body))
            case .success(let response) where (400...499).contains(response.status) && ![408, 429].contains(response.status):
                let reason = OAuthErrorBody.parse(response.body).map { parsed in
                    parsed.description.map { "\(parsed.error): \($0)" } ?? parsed.error
                }
                completion(.failure(.refused(reason ?? "HTTP \(response.status)")))
            case .success(let response):
                completion(.failure(.unavailable("HTTP \(response.status)")))
            }
        }
    }
}
