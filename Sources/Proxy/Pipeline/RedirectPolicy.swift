import Config
import Credentials

/// Redirect decisions, hop by hop (docs/configuration.md, `redirects`), as pure functions.
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
    /// `trusted` says whether the target is a credential host: a hop elsewhere is followed only
    /// as GET or HEAD, so a foreign host never receives a method or body the client meant for
    /// the upstream (other cross-host 3xx are relayed to the client).
    static func decide(
        status: Int, location: String?, method: String, hasBody: Bool, bodyReplayable: Bool,
        current: UpstreamURL, follow: Bool, max: Int, hops: Int,
        trusted: (UpstreamURL) -> Bool = { _ in true }
    ) -> Decision {
        guard follow, [301, 302, 303, 307, 308].contains(status), let location,
            let target = resolve(location, against: current),
            UpstreamTarget.isForwardable(Substring(target.path), encodedSlashes: .forward)
        else { return .relay }
        guard hops < max else { return .tooManyRedirects }
        let decision = methodDecision(
            status: status, target: target, method: method, hasBody: hasBody,
            bodyReplayable: bodyReplayable)
        if case .follow(_, let next, _) = decision, next != "GET" && next != "HEAD", !trusted(target) { return .relay }
        return decision
    }

    /// The `trusted` rule of `decide` for a route: any host with `crossHostMethods: all`, else the
    /// credential hosts (`CredentialInjector.mayCarryCredentials`, which also refuses an https → http
    /// downgrade).
    static func trusts(
        _ target: UpstreamURL, from current: UpstreamURL, methods: RedirectConfiguration.CrossHostMethods,
        injector: CredentialInjector
    ) -> Bool {
        methods == .all || injector.mayCarryCredentials(from: current, to: target)
    }

    private static func methodDecision(
        status: Int, target: UpstreamURL, method: String, hasBody: Bool,
        bodyReplayable: Bool
    ) -> Decision {
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

    /// `location` resolved against `base` (RFC 3986 §5.2), dot segments removed (§5.2.4) so
    /// `../../x` cannot climb above the root as `/../../x` would on a lenient upstream.
    static func resolve(_ location: String, against base: UpstreamURL) -> UpstreamURL? {
        // A fragment names a part of the representation for the client: it is never sent.
        let location = location.utf8.firstIndex(of: UInt8(ascii: "#")).map { String(location[..<$0]) } ?? location
        let parsed: UpstreamURL?
        if hasScheme(location) {
            // Absolute by RFC 3986 §3.1, wherever "://" appears (`/next?return_to=https://x` is a
            // path); one without an authority (`http:/x`, `http:x`) does not parse, and is relayed.
            parsed = UpstreamURL.parse(location)
        } else if location.hasPrefix("//") {
            parsed = UpstreamURL.parse(base.scheme + ":" + location)
        } else if location.hasPrefix("/") {
            parsed = UpstreamURL.parse(base.origin + location)
        } else if location.hasPrefix("?") {
            parsed = UpstreamURL.parse(base.origin + base.path + location)
        } else if location.isEmpty {
            return nil
        } else {
            let cut = base.path.lastIndex(of: "/").map { base.path[...$0] } ?? "/"
            parsed = UpstreamURL.parse(base.origin + cut + location)
        }
        guard var url = parsed else { return nil }
        url.path = removeDotSegments(url.path)
        return url
    }

    /// Whether a reference starts with a scheme: a letter, then letters, digits, `+`, `-` or `.`,
    /// then `:`, before any `/`, `?` or `#` (RFC 3986 §3.1, §4.2).
    static func hasScheme(_ reference: String) -> Bool {
        for (i, b) in reference.utf8.enumerated() {
            switch b {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"): continue
            case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."):
                if i == 0 { return false }
            case UInt8(ascii: ":"): return i > 0
            default: return false
            }
        }
        return false
    }

    /// RFC 3986 §5.2.4 on a path beginning with "/": `.` segments vanish, `..` removes the
    /// segment before it and never climbs above the root.
    static func removeDotSegments(_ path: String) -> String {
        guard path.contains(".") else { return path }
        var output: [Substring] = []
        let segments = path.split(separator: "/", omittingEmptySubsequences: false).dropFirst()
        for (i, segment) in segments.enumerated() {
            let last = i == segments.count - 1
            switch segment {
            case ".":
                if last { output.append("") }
            case "..":
                if !output.isEmpty { output.removeLast() }
                if last { output.append("") }
            default:
                output.append(segment)
            }
        }
        return "/" + output.joined(separator: "/")
    }
}
