import Config
import JSON
import Testing

@testable import Credentials

struct JourneyClientTests {
    @Test("authenticate is a POST to the realm's authenticate with the SDK's headers and the tree in the query")
    func authenticate() {
        let request = journeyTestClient.authenticate(journey: "Login", body: json("{}"))
        #expect(request.method == "POST")
        #expect(
            request.url
                == "https://am.test/am/json/realms/root/realms/alpha/authenticate?authIndexType=service&authIndexValue=Login"
        )
        #expect(request.headers.contains("Accept-API-Version: resource=2.1, protocol=1.0"))
        #expect(request.headers.contains("Content-Type: application/json"))
        #expect(!request.headers.contains { $0.hasPrefix("Cookie") })
        #expect(request.body == Array("{}".utf8))
    }

    @Test("forceAuth, noSession, a suspendedId and an existing session go where AM reads them")
    func options() {
        var config = journeyTestClient.config
        config.forceAuth = true
        config.noSession = true
        let client = JourneyClient(
            config: config, clientID: "app", redirectURI: journeyTestClient.redirectURI, scopes: ["openid"],
            authorizeURL: journeyTestClient.authorizeURL)
        let request = client.authenticate(journey: nil, body: json("{}"), suspendedId: "s 1", session: "tok")
        #expect(
            request.url
                == "https://am.test/am/json/realms/root/realms/alpha/authenticate?suspendedId=s%201&ForceAuth=true&noSession=true"
        )
        #expect(request.headers.contains("Cookie: tenantCookie=tok"))
    }

    @Test("the root realm has no nested realms segment")
    func rootRealm() {
        let client = JourneyClient(
            config: JourneyConfiguration(serverURL: UpstreamURL.parse("https://am.test/am")!), clientID: "c",
            redirectURI: "http://x/cb", scopes: [], authorizeURL: UpstreamURL.parse("https://am.test/a")!)
        #expect(
            client.authenticate(journey: "L", body: json("{}")).url.hasPrefix(
                "https://am.test/am/json/realms/root/authenticate?"))
        #expect(client.logout(session: "t").url == "https://am.test/am/json/realms/root/sessions?_action=logout")
    }

    @Test("authorize carries the session cookie, PKCE S256, response_type=code, state and nonce")
    func authorize() {
        let pkce = PKCE(verifier: "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk")
        let request = journeyTestClient.authorize(session: "tok", pkce: pkce, state: "st", nonce: "no")
        #expect(request.method == "GET")
        #expect(
            request.url.hasPrefix(
                "https://am.test/am/oauth2/realms/root/realms/alpha/authorize?client_id=app&response_type=code&"))
        #expect(
            request.url.contains(
                "code_challenge=E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM&code_challenge_method=S256"))
        #expect(request.url.contains("state=st&nonce=no"))
        #expect(request.url.contains("scope=openid%20profile") || request.url.contains("scope=openid+profile"))
        #expect(request.headers.contains("Cookie: tenantCookie=tok"))
    }

    @Test("logout posts to sessions?_action=logout with the session as cookie and as the tenant's header")
    func logout() {
        let request = journeyTestClient.logout(session: "tok")
        #expect(request.url == "https://am.test/am/json/realms/root/realms/alpha/sessions?_action=logout")
        #expect(request.headers.contains("Cookie: tenantCookie=tok"))
        #expect(request.headers.contains("tenantCookie: tok"))
        #expect(request.headers.contains("Accept-API-Version: resource=3.1, protocol=1.0"))
    }

    /// (status, Location, the redirect read with state "st")
    static let redirects: [(status: Int, location: String?, expected: JourneyClient.Redirect)] = [
        (302, "http://127.0.0.1:8080/_platform/callback?code=c1&state=st", .code("c1")),
        (302, "http://127.0.0.1:8080/_platform/callback?code=c1&state=st&iss=x#frag", .code("c1")),
        (
            302, "http://127.0.0.1:8080/_platform/callback?error=access_denied&error_description=no&state=st",
            .refused("access_denied: no")
        ),
        (
            302, "http://127.0.0.1:8080/_platform/callback?code=c1&state=other",
            .invalid("the authorize redirect's state does not match")
        ),
        (302, "http://127.0.0.1:8080/_platform/callback?state=st", .invalid("the authorize redirect carries no code")),
        (
            302, "https://am.test/am/XUI/?goto=x",
            .invalid("AM redirected somewhere else than the redirect URI (no valid session?)")
        ),
        (
            200, nil,
            .invalid(
                "AM answered the authorize request with HTTP 200, not a redirect (no valid session, or consent is required)"
            )
        ),
    ]

    @Test("the authorize answer is read from the 302's Location", arguments: redirects)
    func redirect(status: Int, location: String?, expected: JourneyClient.Redirect) {
        #expect(journeyTestClient.redirect(status: status, location: location, state: "st") == expected)
    }
}
