/// One proxied path prefix and its credential policy.
public struct RouteConfiguration: Sendable, Equatable {
    /// Unique name, used in metrics, logs and the `/_platform/mock` switch. Required.
    public var name: String
    /// Unique path prefix beginning with "/", matched on a segment boundary. Required.
    public var path: String
    /// Where requests go; the path after the prefix is appended. Required unless `mock` is set.
    public var upstream: UpstreamURL?
    /// Which token is injected. Default `.none` (a provider is required for any other value).
    public var credential: CredentialKind
    /// The name of the provider whose tokens are injected; set by the decoder for every
    /// credentialed route (the only provider when there is one). Default nil.
    public var provider: String?
    /// Header names that receive "<token_type> <token>". Default ["Authorization", "X-Authorization"].
    public var headers: [String]
    /// How upstream redirects are followed and where credentials may go.
    public var redirects: RedirectConfiguration
    /// Refresh and retry once when the upstream answers 401. Default false.
    public var retryOn401: Bool
    /// Seconds allowed for the whole upstream exchange. Default 30.
    public var timeoutSeconds: Double
    /// Mock files for this route; nil when it has none. Default nil.
    public var mock: MockConfiguration?
    /// Send the subject's experiment variants upstream in `X-Experiments`. Default false.
    public var experimentHeader: Bool
    /// What a percent-encoded `/` or `\` in the path does. Default `.reject` (400 `invalid_path`).
    public var encodedSlashes: EncodedSlashes
    /// `Upgrade` protocols tunnelled (lowercased). Default ["websocket"]; [] refuses upgrades.
    public var upgrades: [String] = ["websocket"]
    /// Seconds a tunnel may carry no byte either way before it is closed. Default 3600.
    public var tunnelIdleTimeoutSeconds: Double = 3600
    /// Seconds a streamed response may be quiet once its head arrived, instead of
    /// `timeoutSeconds`; nil: `text/event-stream` responses get `defaultStreamIdleTimeout`, others
    /// `timeoutSeconds`. Default nil.
    public var streamIdleTimeoutSeconds: Double?
    /// The quiet allowed to an event stream on a route that sets no `streamIdleTimeoutSeconds`.
    public static let defaultStreamIdleTimeout: Double = 3600
    /// RFC 8693: the upstream gets a token exchanged from the provider's access token for this
    /// audience, never the provider's token itself. Default nil.
    public var tokenExchange: TokenExchangeConfiguration?
    /// TLS for this route's upstream (CA, client certificate, server name). Default nil.
    public var tls: TLSConfiguration?

    /// The default credential headers.
    public static let defaultHeaders = ["Authorization", "X-Authorization"]

    /// A route; `redirects` defaults to following with the upstream's own host:port as the only credential host.
    public init(
        name: String, path: String, upstream: UpstreamURL?, credential: CredentialKind = .none,
        headers: [String] = RouteConfiguration.defaultHeaders, redirects: RedirectConfiguration? = nil,
        retryOn401: Bool = false, timeoutSeconds: Double = 30, mock: MockConfiguration? = nil,
        experimentHeader: Bool = false,
        encodedSlashes: EncodedSlashes = .reject
    ) {
        self.name = name
        self.path = path
        self.upstream = upstream
        self.credential = credential
        self.headers = headers
        self.redirects = redirects ?? RedirectConfiguration(credentialHosts: upstream.map { [$0.hostPort] } ?? [])
        self.retryOn401 = retryOn401
        self.timeoutSeconds = timeoutSeconds
        self.mock = mock
        self.experimentHeader = experimentHeader
        self.encodedSlashes = encodedSlashes
    }
}

/// What a route does with `%2F` / `%5C` in a request path (Envoy's `path_with_escaped_slashes_action`).
public enum EncodedSlashes: String, Sendable, Equatable, CaseIterable {
    /// Refuse with 400 `invalid_path`: many upstreams decode them and walk out of the route's prefix.
    case reject
    /// Forward them as they are (object-store keys); dot segments between them are still refused.
    case forward
}

/// How a route follows upstream redirects.
public struct RedirectConfiguration: Sendable, Equatable {
    /// Follow 3xx responses; false relays them as they are. Default true.
    public var follow: Bool
    /// Most redirects followed for one request, 0...20. Default 5.
    public var max: Int
    /// "host:port" entries (lowercased, IPv6 bracketed) that may receive credentials. Default: the upstream's host:port.
    public var credentialHosts: [String]
    /// Which methods a hop to a host outside `credentialHosts` may carry. Default `.safe` (GET and HEAD).
    public var crossHostMethods: CrossHostMethods

    /// Redirect rules with the documented defaults unless given.
    public init(
        follow: Bool = true, max: Int = 5, credentialHosts: [String], crossHostMethods: CrossHostMethods = .safe
    ) {
        self.follow = follow
        self.max = max
        self.credentialHosts = credentialHosts
        self.crossHostMethods = crossHostMethods
    }

    /// What a redirect to a host outside `credentialHosts` may carry.
    public enum CrossHostMethods: String, Sendable, Equatable, CaseIterable {
        /// Only GET and HEAD hops are followed; other cross-host 3xx are relayed to the client.
        case safe
        /// Every method is followed, and 307/308 resend the body to the other host.
        case all
    }
}

/// A route's folder of mock responses.
public struct MockConfiguration: Sendable, Equatable {
    /// How the folder is used.
    public enum Mode: String, Sendable, Equatable, CaseIterable {
        /// Answer from the files, never calling the upstream.
        case replay
        /// Forward upstream and save 2xx bodies into the folder.
        case record
        /// Ignore the folder (unless the global mock switch is on).
        case off
    }

    /// Absolute folder path (relative ones resolve against the config file's directory). Required.
    public var directory: String
    /// Replay, record or off. Default `.replay`.
    public var mode: Mode
    /// In record mode, replace files that already exist. Default false.
    public var overwrite: Bool

    /// Mock settings with the documented defaults unless given.
    public init(directory: String, mode: Mode = .replay, overwrite: Bool = false) {
        self.directory = directory
        self.mode = mode
        self.overwrite = overwrite
    }
}
