/// An absolute http or https URL, split into the parts a proxy needs.
///
/// IPv6 hosts keep their brackets (`[::1]`), so `hostPort` and `origin` are
/// ready to use in a Host header or a URL.
public struct UpstreamURL: Sendable, Equatable, Hashable, CustomStringConvertible {
    /// The scheme, host and port, and the origin text made from them once: shared by every copy
    /// of a URL, so the copies a forwarded request makes retain one object rather than each part.
    private final class Authority: Sendable {
        let scheme: String
        let host: String
        let port: UInt16
        let origin: String

        init(scheme: String, host: String, port: UInt16) {
            self.scheme = scheme
            self.host = host
            self.port = port
            origin =
                port == UpstreamURL.defaultPort(for: scheme) ? "\(scheme)://\(host)" : "\(scheme)://\(host):\(port)"
        }
    }

    private let authority: Authority
    /// "http" or "https", lowercased.
    public var scheme: String { authority.scheme }
    /// Lowercased host name, IPv4 literal, or bracketed IPv6 literal.
    public var host: String { authority.host }
    /// The explicit port, or the scheme's default (80, 443).
    public var port: UInt16 { authority.port }
    /// "scheme://host" plus ":port" when not the default (RFC 6454 serialization): made once with
    /// the URL, since every forwarded request's URL starts with it (a route's upstream URL is
    /// copied with a new path and query, and `description` formats no number).
    public var origin: String { authority.origin }
    /// The path, always beginning with "/"; percent-escapes kept as written.
    public var path: String
    /// The query after "?", without the "?"; nil when there is none.
    public var query: String?

    /// A URL from its parts; `parse` is the validating way in.
    public init(scheme: String, host: String, port: UInt16? = nil, path: String = "/", query: String? = nil) {
        authority = Authority(scheme: scheme, host: host, port: port ?? UpstreamURL.defaultPort(for: scheme))
        self.path = path
        self.query = query
    }

    /// The same scheme, host and port with another path and query: the origin's object is shared,
    /// and no part of this URL is copied to be replaced.
    public func replacing(path: String, query: String?) -> UpstreamURL {
        UpstreamURL(authority: authority, path: path, query: query)
    }

    private init(authority: Authority, path: String, query: String?) {
        self.authority = authority
        self.path = path
        self.query = query
    }

    /// The same URL with its own copy of every part. An event loop forwards with its own copy of a
    /// route's URL, so the reference counts its requests write are not the ones another loop's
    /// requests write (docs/performance.md, "Nothing shared is written"; bench/shared-writes.sh).
    public func privateCopy() -> UpstreamURL {
        UpstreamURL(
            scheme: scheme.privateCopy(), host: host.privateCopy(), port: port, path: path.privateCopy(),
            query: query?.privateCopy())
    }

    public static func == (a: UpstreamURL, b: UpstreamURL) -> Bool {
        a.scheme == b.scheme && a.host == b.host && a.port == b.port && a.path == b.path && a.query == b.query
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(scheme)
        hasher.combine(host)
        hasher.combine(port)
        hasher.combine(path)
        hasher.combine(query)
    }

    /// 443 for https, 80 otherwise.
    public static func defaultPort(for scheme: String) -> UInt16 { scheme == "https" ? 443 : 80 }

    /// True when the port is the scheme's default.
    public var hasDefaultPort: Bool { port == UpstreamURL.defaultPort(for: scheme) }

    /// "host:port", port always present: the unit credentials are scoped to.
    public var hostPort: String { "\(host):\(port)" }

    /// The whole URL (built for every forwarded request: one allocation, `String.build`).
    public var description: String {
        let capacity = origin.utf8.count + path.utf8.count + 1 + (query?.utf8.count ?? 0)
        return String.build(capacity: capacity) { url in
            url.put(origin)
            url.put(path)
            if let query {
                url.put("?")
                url.put(query)
            }
        }
    }

    /// The URL, or nil if it is not an absolute http(s) URL without user info or fragment.
    public static func parse(_ text: String) -> UpstreamURL? {
        try? validate(text).get()
    }

    /// The URL, or the reason it is refused (a sentence fragment for config errors).
    static func validate(_ text: String) -> Result<UpstreamURL, Refusal> {
        guard !text.utf8.contains(where: { $0 <= 0x20 || $0 == 0x7F }) else {
            return .failure(Refusal("it contains spaces or control characters"))
        }
        guard let schemeEnd = text.firstRange(ofText: "://") else { return .failure(Refusal("it has no scheme")) }
        let scheme = text[..<schemeEnd.lowerBound].lowercased()
        guard scheme == "http" || scheme == "https" else {
            return .failure(Refusal("the scheme \"\(scheme)\" is not http or https"))
        }
        guard !text.contains("#") else { return .failure(Refusal("a fragment (#) is not allowed")) }
        let rest = text[schemeEnd.upperBound...]
        let authorityEnd = rest.firstIndex { $0 == "/" || $0 == "?" } ?? rest.endIndex
        let authority = String(rest[..<authorityEnd])
        guard !authority.contains("@") else { return .failure(Refusal("user info (user@) is not allowed")) }
        guard !authority.isEmpty else { return .failure(Refusal("the host is empty")) }
        guard let (host, portText) = HostSyntax.splitHostPort(authority) else {
            return .failure(Refusal("\"\(authority)\" is not a valid host"))
        }
        var port = defaultPort(for: scheme)
        if let portText {
            guard let explicit = HostSyntax.port(portText) else {
                return .failure(Refusal("the port \"\(portText)\" is not a number from 1 to 65535"))
            }
            port = explicit
        }
        let target = rest[authorityEnd...]
        var path = target
        var query: String?
        if let mark = target.firstIndex(of: "?") {
            path = target[..<mark]
            query = String(target[target.index(after: mark)...])
        }
        return .success(
            UpstreamURL(
                scheme: scheme, host: host, port: port, path: path.isEmpty ? "/" : String(path), query: query))
    }

    /// Why a URL was refused.
    struct Refusal: Error {
        let reason: String
        init(_ reason: String) { self.reason = reason }
    }
}
