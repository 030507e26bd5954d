/// One proxied path prefix and its credential policy.
package struct RouteConfiguration: Sendable, Equatable {
    /// Unique name, used in metrics, logs and the `/_platform/mock` switch. Required.
    package var name: String
    /// Unique path prefix beginning with "/", matched on a segment boundary. Required.
    package var path: String
    /// Where requests go; the path after the prefix is appended. Required unless `mock` is set.
    package var upstream: UpstreamURL?
    /// Which token is injected. Default `.none` (a provider is required for any other value).
    package var credential: CredentialKind
    /// The name of the provider whose tokens are injected; set by the decoder for every
    /// credentialed route (the only provider when there is one). Default nil.
    package var provider: String?
    /// Header names that receive "<token_type> <token>". Default ["Authorization", "X-Authorization"].
    package var headers: [String]
    /// How upstream redirects are followed and where credentials may go.
    package var redirects: RedirectConfiguration
    /// Refresh and retry once when the upstream answers 401. Default false.
    package var retryOn401: Bool
    /// Seconds allowed for the whole upstream exchange. Default 30.
    package var timeoutSeconds: Double
    /// Mock files for this route; nil when it has none. Default nil.
    package var mock: MockConfiguration?
    /// Send the subject's experiment variants upstream in `X-Experiments`. Default false.
    package var experimentHeader: Bool
    /// What a percent-encoded `/` or `\` in the path does. Default `.reject` (400 `invalid_path`).
    package var encodedSlashes: EncodedSlashes
    /// `Upgrade` protocols tunnelled (lowercased). Default ["websocket"]; [] refuses upgrades.
    package var upgrades: [String] = ["websocket"]
    /// Seconds a tunnel may carry no byte either way before it is closed. Default 3600.
    package var tunnelIdleTimeoutSeconds: Double = 3600
    /// Seconds a streamed response may be quiet once its head arrived, instead of
    /// `timeoutSeconds`; nil: `text/event-stream` responses get `defaultStreamIdleTimeout`, others
    /// `timeoutSeconds`. Default nil.
    package var streamIdleTimeoutSeconds: Double?
    /// The quiet allowed to an event stream on a route that sets no `streamIdleTimeoutSeconds`.
    package static let defaultStreamIdleTimeout: Double = 3600
    /// RFC 8693: the upstream gets a token exchanged from the provider's access token for this
    /// audience, never the provider's token itself. Default nil.
    package var tokenExchange: TokenExchangeConfiguration?
    /// TLS for this route's upstream (CA, client certificate, server name). Default nil.
    package var tls: TLSConfiguration?

    /// The default credential headers.
    package static let defaultHeaders = ["Authorization", "X-Authorization"]

    /// A route; `redirects` defaults to following with the upstream's own host:port as the only credential host.
    package init(
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
package enum EncodedSlashes: String, Sendable, Equatable, CaseIterable {
    /// Refuse with 400 `invalid_path`: many upstreams decode them and walk out of the route's prefix.
    case reject
    /// Forward them as they are (object-store keys); dot segments between them are still refused.
    case forward
}

/// How a route follows upstream redirects.
package struct RedirectConfiguration: Sendable, Equatable {
    /// Follow 3xx responses; false relays them as they are. Default true.
    package var follow: Bool
    /// Most redirects followed for one request, 0...20. Default 5.
    package var max: Int
    /// "host:port" entries (lowercased, IPv6 bracketed) that may receive credentials. Default: the upstream's host:port.
    package var credentialHosts: [String]
    /// Which methods a hop to a host outside `credentialHosts` may carry. Default `.safe` (GET and HEAD).
    package var crossHostMethods: CrossHostMethods

    /// Redirect rules with the documented defaults unless given.
    package init(
        follow: Bool = true, max: Int = 5, credentialHosts: [String], crossHostMethods: CrossHostMethods = .safe
    ) {
        self.follow = follow
        self.max = max
        self.credentialHosts = credentialHosts
        self.crossHostMethods = crossHostMethods
    }

    /// What a redirect to a host outside `credentialHosts` may carry.
    package enum CrossHostMethods: String, Sendable, Equatable, CaseIterable {
        /// Only GET and HEAD hops are followed; other cross-host 3xx are relayed to the client.
        case safe
        /// Every method is followed, and 307/308 resend the body to the other host.
        case all
    }
}

/// A route's folder of mock responses.
package struct MockConfiguration: Sendable, Equatable {
    /// How the folder is used.
    package enum Mode: String, Sendable, Equatable, CaseIterable {
        /// Answer from the files, never calling the upstream.
        case replay
        /// Forward upstream and save 2xx bodies into the folder.
        case record
        /// Ignore the folder (unless the global mock switch is on).
        case off
    }

    /// Absolute folder path (relative ones resolve against the config file's directory). Required.
    package var directory: String
    /// Replay, record or off. Default `.replay`.
    package var mode: Mode
    /// In record mode, replace files that already exist. Default false.
    package var overwrite: Bool

    /// Mock settings with the documented defaults unless given.
    package init(directory: String, mode: Mode = .replay, overwrite: Bool = false) {
        self.directory = directory
        self.mode = mode
        self.overwrite = overwrite
    }
}
