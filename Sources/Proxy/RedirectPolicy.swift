import Config

/// Redirect decisions, hop by hop (SPEC "redirects"), as pure functions.
enum RedirectPolicy {
    /// What to do with a 3xx.
    enum Decision: Equatable {
        /// Relay the response to the client as it is.
        case relay
        /// Send the next hop: to `url`, with `method`, with or without the request body.
        case follow(url: UpstreamURL, method: String, keepsBody: Bool)
        /// The route's `max` is used up.
        case tooManyRedirects
    }

    /// The decision for `status` with `location`, after `hops` redirects already followed.
    /// `bodyReplayable` says whether a 307/308 can resend the body (it was kept whole).
    static func decide(status: Int, location: String?, method: String, hasBody: Bool, bodyReplayable: Bool,
                       current: UpstreamURL, follow: Bool, max: Int, hops: Int) -> Decision {
        guard follow, [301, 302, 303, 307, 308].contains(status), let location,
              let target = resolve(location, against: current) else { return .relay }
        guard hops < max else { return .tooManyRedirects }
        switch status {
        case 307, 308:
            if hasBody && !bodyReplayable { return .relay }
            return .follow(url: target, method: method, keepsBody: hasBody)
        case 303 where method != "HEAD":
            return .follow(url: target, method: "GET", keepsBody: false)
        default:
            // 301/302 turn POST into GET as browsers do; other methods are kept.
            if method == "POST" { return .follow(url: target, method: "GET", keepsBody: false) }
            if hasBody && !bodyReplayable { return .relay }
            return .follow(url: target, method: method, keepsBody: hasBody)
        }
    }

    /// `location` resolved against `base` (RFC 3986 §5.2, without dot-segment removal: such
    /// targets are refused rather than normalised).
    static func resolve(_ location: String, against base: UpstreamURL) -> UpstreamURL? {
        if location.contains("://") { return UpstreamURL.parse(location) }
        if location.hasPrefix("//") { return UpstreamURL.parse(base.scheme + ":" + location) }
        let prefix = base.origin
        if location.hasPrefix("/") { return UpstreamURL.parse(prefix + location) }
        if location.hasPrefix("?") { return UpstreamURL.parse(prefix + base.path + location) }
        guard !location.isEmpty else { return nil }
        let directory = base.path.prefix { _ in true }
        let cut = directory.lastIndex(of: "/").map { directory[...$0] } ?? "/"
        return UpstreamURL.parse(prefix + cut + location)
    }
}
