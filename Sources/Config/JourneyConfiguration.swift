/// A ForgeRock AM / PingOne Advanced Identity Cloud authentication tree ("journey") that signs
/// the user in before the OIDC authorize + token exchange (`provider.grant: "journey"`).
public struct JourneyConfiguration: Sendable, Equatable {
    /// AM's base URL, e.g. `https://tenant.forgeblocks.com/am`. Required.
    public var serverURL: UpstreamURL
    /// The realm; `root` is the top-level one (PingOne AIC uses `alpha`, `bravo`). Default "root".
    public var realm: String
    /// Name of the session cookie the tenant issues. Default "iPlanetDirectoryPro".
    public var cookieName: String
    /// The tree started when a request names none. Default "Login".
    public var journey: String
    /// Run the tree even when an AM session already exists (`ForceAuth=true`). Default false.
    public var forceAuth: Bool
    /// Ask AM for no session (`noSession=true`): the tree verifies the user but no tokens follow. Default false.
    public var noSession: Bool
    /// Seconds allowed for each call to AM (authenticate, authorize, logout). Default 30.
    public var timeoutSeconds: Double
    /// Further trees an app may start by name besides `journey`: the stored AM session goes
    /// along with every start, so an unlisted tree (a profile or MFA-registration tree) must
    /// not be reachable by any local caller. Default [].
    public var allowedJourneys: [String] = []

    /// Whether an app may start the tree `name`.
    public func allows(_ name: String) -> Bool { name == journey || allowedJourneys.contains(name) }

    /// A journey with the documented defaults unless given.
    public init(
        serverURL: UpstreamURL, realm: String = "root", cookieName: String = "iPlanetDirectoryPro",
        journey: String = "Login", forceAuth: Bool = false, noSession: Bool = false, timeoutSeconds: Double = 30
    ) {
        self.serverURL = serverURL
        self.realm = realm
        self.cookieName = cookieName
        self.journey = journey
        self.forceAuth = forceAuth
        self.noSession = noSession
        self.timeoutSeconds = timeoutSeconds
    }

    /// `/realms/root` or `/realms/root/realms/{realm}`: AM's path to the realm.
    public var realmPath: String { realm == "root" ? "/realms/root" : "/realms/root/realms/\(realm)" }

    /// `serverURL` joined with `path` (which starts with `/`), with an optional query.
    public func url(_ path: String, query: String? = nil) -> UpstreamURL {
        var url = serverURL
        url.path = (serverURL.path.hasSuffix("/") ? String(serverURL.path.dropLast()) : serverURL.path) + path
        url.query = query
        return url
    }

    /// The realm's OAuth 2 endpoint `name` (`authorize`, `access_token`, `token/revoke`, `userinfo`).
    public func oauthEndpoint(_ name: String) -> UpstreamURL { url("/oauth2" + realmPath + "/" + name) }

    /// Whether `name` is fit for a realm or tree name: letters, digits, `-`, `_`, `.`; not a dot segment.
    public static func isPlainName(_ name: String) -> Bool {
        !name.isEmpty && name != "." && name != ".."
            && name.utf8.allSatisfy { byte in
                (byte >= 0x30 && byte <= 0x39) || (byte | 0x20 >= 0x61 && byte | 0x20 <= 0x7A) || byte == 0x2D
                    || byte == 0x5F || byte == 0x2E
            }
    }
}
