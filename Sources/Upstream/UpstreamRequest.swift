/// One request to an upstream, as the proxy decided it: exact method, URL and header lines.
public struct UpstreamRequest: Sendable {
    /// The method, e.g. `GET`.
    public var method: String
    /// The absolute URL, as its parts.
    public var target: RequestURL
    /// The absolute URL.
    public var url: String { target.description }
    /// Header lines `Name: value`, in order; Host, Content-Length and Transfer-Encoding are curl's.
    public var headers: HeaderLines
    /// More lines sent after `headers` (the proxy's injected credentials), kept apart so neither
    /// list is copied to join them.
    public var extraHeaders: HeaderLines
    /// Body length when known; nil with a body means chunked.
    public var bodyLength: Int?
    /// Whether a body follows (streamed through the transfer's `RequestBody`).
    public var hasBody: Bool
    /// Seconds allowed until the response head, and for any stall after it.
    public var timeout: Double
    /// Seconds a response may stall once its head arrived, instead of `timeout`, whatever its
    /// type (a route's `streamIdleTimeoutSeconds`); nil: `timeout`, except for an event stream.
    public var streamIdleTimeout: Double?
    /// Seconds an event stream (`text/event-stream`) may stall once its head arrived, when
    /// `streamIdleTimeout` is nil: its server may stay quiet between events for long.
    public var eventStreamIdleTimeout: Double = 3600
    /// Whether `headers` has an `Accept` and a `Content-Type` line, when whoever built them
    /// knows (the proxy does, from the client's fields); nil: the transfer scans the lines.
    /// curl adds its own of each unless told otherwise.
    public var supplies: SuppliedFields?
    /// The same for `extraHeaders` (the proxy knows it once per token, not per request); nil: scanned.
    public var extraSupplies: SuppliedFields?
    /// Whether the request goes out at most once. libcurl sends an HTTP/1.1 request again by itself,
    /// on a new connection, when a reused one died before any byte of a response, whatever the
    /// method; the upstream may have acted on the first. Set, a second send is refused and the
    /// transfer fails as `UpstreamError.staleConnection`, for the caller to decide (the proxy
    /// sets it for every hop that is not a bodiless idempotent one, RFC 9110 §9.2.2).
    public var sendsOnce = false
    /// Whether the body is asked for and relayed in its identity form: libcurl sends
    /// `Accept-Encoding: identity` and decodes a body that comes encoded all the same (gzip,
    /// deflate, and br or zstd where libcurl was built with them), so the delegate receives the
    /// bytes a reader would see; the head keeps the upstream's `Content-Encoding` and
    /// `Content-Length`, which then describe the encoded body (`UpstreamResponseHead.isContentEncoded`).
    /// The caller leaves the client's `Accept-Encoding` out of `headers`.
    public var decodesContent = false
    /// Whether a connection to one of the client's `ownListeners` is refused
    /// (`UpstreamError.loop`): the proxy's hops, never its own calls to identity providers.
    public var refusesOwnListeners = false
    /// The provider's or route's TLS settings; nil: the process-wide defaults.
    public var tls: UpstreamTLS?

    /// Creates a request.
    public init(method: String, url: String, headers: HeaderLines, hasBody: Bool, bodyLength: Int?, timeout: Double) {
        self.init(
            method: method, target: RequestURL(url), headers: headers, hasBody: hasBody, bodyLength: bodyLength,
            timeout: timeout)
    }

    /// Creates a request for a URL given as its parts; `supplies`, `extraHeaders`,
    /// `extraSupplies`, `sendsOnce` and `refusesOwnListeners` as the properties of those names.
    public init(
        method: String, target: RequestURL, headers: HeaderLines, supplies: SuppliedFields? = nil,
        extraHeaders: HeaderLines = HeaderLines(), extraSupplies: SuppliedFields? = nil, hasBody: Bool,
        bodyLength: Int?, timeout: Double, sendsOnce: Bool = false, refusesOwnListeners: Bool = false
    ) {
        self.method = method
        self.target = target
        self.headers = headers
        self.supplies = supplies
        self.extraHeaders = extraHeaders
        self.extraSupplies = extraSupplies
        self.hasBody = hasBody
        self.bodyLength = bodyLength
        self.timeout = timeout
        self.sendsOnce = sendsOnce
        self.refusesOwnListeners = refusesOwnListeners
    }

    /// Creates a request from header lines given as strings.
    public init(method: String, url: String, headers: [String], hasBody: Bool, bodyLength: Int?, timeout: Double) {
        self.init(
            method: method, url: url, headers: HeaderLines(headers), hasBody: hasBody, bodyLength: bodyLength,
            timeout: timeout)
    }
}

/// Whether header lines name the fields curl would otherwise add on its own.
public struct SuppliedFields: Sendable, Equatable {
    public var accept: Bool
    public var contentType: Bool

    public init(accept: Bool, contentType: Bool) {
        self.accept = accept
        self.contentType = contentType
    }
}
