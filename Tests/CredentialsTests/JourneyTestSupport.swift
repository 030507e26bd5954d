import Config
import JSON

@testable import Credentials

/// The journey client every journey test uses: realm alpha on a test AM.
let journeyTestClient = JourneyClient(
    config: JourneyConfiguration(
        serverURL: UpstreamURL.parse("https://am.test/am")!, realm: "alpha", cookieName: "tenantCookie"),
    clientID: "app", redirectURI: "http://127.0.0.1:8080/_platform/callback", scopes: ["openid", "profile"],
    authorizeURL: UpstreamURL.parse("https://am.test/am/oauth2/realms/root/realms/alpha/authorize")!)

/// Parses JSON written in a test (it is always valid there).
func json(_ text: String) -> JSONValue { try! JSONValue.parse(text) }

/// A step object with `callbacks` (JSON text of the array).
func stepJSON(_ callbacks: String, authId: String = "auth-1", stage: String? = nil) -> String {
    #"{"authId":"\#(authId)","callbacks":\#(callbacks)"# + (stage.map { #","stage":"\#($0)""# } ?? "") + "}"
}

/// AM's name + password page.
let namePasswordCallbacks = """
    [{"type":"NameCallback","output":[{"name":"prompt","value":"User Name"}],"input":[{"name":"IDToken1","value":""}]},
     {"type":"PasswordCallback","output":[{"name":"prompt","value":"Password"}],"input":[{"name":"IDToken2","value":""}]}]
    """
