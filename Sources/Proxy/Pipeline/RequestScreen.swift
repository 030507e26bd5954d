import HTTP1

/// Refusals decided from the request head alone, before or right after routing: method
/// overrides naming TRACE, and requests a browser marks as coming from another site.
enum RequestScreen {
    /// What the fields the screen reads say, found in one pass over the head.
    struct Fields {
        /// The `Sec-Fetch-Site` value, if any.
        var fetchSite: String?
        /// The `Sec-Fetch-Mode` value, if any.
        var fetchMode: String?
        /// The `Sec-Fetch-Dest` value, if any.
        var fetchDest: String?
        /// Whether a method-override field names TRACE or TRACK.
        var overridesToTrace = false
        /// The `Origin` value, if any.
        var origin: String?
        /// The `X-Proxy-Key` value, if any.
        var proxyKey: String?
    }

    /// Endpoints a browser is sent to from other sites, exempt from the `Sec-Fetch-Site` check:
    /// the login only redirects to the IdP, and the IdP sends the browser back to the callback
    /// from its own site (the callback's `state` check is its cross-site defence).
    /// Only a top-level navigation is exempt (`Sec-Fetch-Mode: navigate`, or no such field, and
    /// no frame `Sec-Fetch-Dest`): an `<img>`, a `fetch` or a frame from another site has no
    /// business starting logins (each one takes a place in the bounded table of pending ones,
    /// unseen by the user), nor a login page drawn inside another site's page.
    static let navigationTargets: Set<Substring> = ["/_platform/login", "/_platform/callback"]

    /// `Sec-Fetch-Dest` values of a document loaded inside another page.
    static let frameDestinations: Set<String> = ["iframe", "frame", "embed", "object", "fencedframe"]

    /// Whether `Sec-Fetch-Mode` and `Sec-Fetch-Dest` allow the navigation exemption: the mode
    /// absent or `navigate`, no destination a frame (of the lines joined, when sent twice).
    static func isTopLevelNavigation(fetchMode: String?, fetchDest: String?) -> Bool {
        guard fetchMode.map({ $0.trimmingCharacters().lowercased() == "navigate" }) ?? true else { return false }
        guard let fetchDest else { return true }
        return !fetchDest.split(separator: ",").contains {
            frameDestinations.contains($0.trimmingCharacters().lowercased())
        }
    }

    private static let origin = StaticBytes("origin")
    private static let proxyKey = StaticBytes("x-proxy-key")
    private static let fetchSite = StaticBytes("sec-fetch-site")
    private static let fetchMode = StaticBytes("sec-fetch-mode")
    private static let fetchDest = StaticBytes("sec-fetch-dest")
    /// Fields frameworks read as "treat this request as that method".
    private static let overrides = [
        StaticBytes("x-http-method-override"), StaticBytes("x-http-method"), StaticBytes("x-method-override"),
    ]

    /// One pass over the head; names are compared only when their length fits. A field sent more
    /// than once reads as its lines joined with ", " (RFC 9110 §5.3), which no check accepts: a
    /// second `Origin`, `Sec-Fetch-Site` or `X-Proxy-Key` cannot hide behind a first that passes.
    static func fields(_ head: HTTPRequestHead) -> Fields {
        // Indexes first, strings after: only fields that are there become strings.
        var origin: Int?, key: Int?, site: Int?, mode: Int?, dest: Int?
        var repeated = false
        var overridesToTrace = false
        func note(_ i: Int, _ slot: inout Int?) {
            if slot == nil { slot = i } else { repeated = true }
        }
        for i in 0..<head.fieldCount {
            let length = head.fields[i].name.count
            if length == Self.origin.count, head.nameEquals(i, Self.origin) {
                note(i, &origin)
            } else if length == proxyKey.count, head.nameEquals(i, proxyKey) {
                note(i, &key)
            } else if length == fetchSite.count, head.nameEquals(i, fetchSite) {
                note(i, &site)
            } else if length == fetchMode.count, head.nameEquals(i, fetchMode) {
                note(i, &mode)
            } else if length == fetchDest.count, head.nameEquals(i, fetchDest) {
                note(i, &dest)
            } else if length >= 13 && length <= 22,
                overrides.contains(where: { $0.count == length && head.nameEquals(i, $0) })
            {
                overridesToTrace = overridesToTrace || namesTrace(head.value(at: i))
            }
        }
        func value(_ index: Int?, _ name: StaticBytes) -> String? {
            guard let index else { return nil }
            guard repeated else { return head.value(at: index) }
            let lines = (index..<head.fieldCount).filter {
                head.fields[$0].name.count == name.count && head.nameEquals($0, name)
            }
            return lines.map(head.value(at:)).joined(separator: ", ")
        }
        return Fields(
            fetchSite: value(site, fetchSite), fetchMode: value(mode, fetchMode), fetchDest: value(dest, fetchDest),
            overridesToTrace: overridesToTrace,
            origin: value(origin, Self.origin), proxyKey: value(key, proxyKey))
    }

    /// Whether an override value (a method, or a list of them) names TRACE or TRACK in any case.
    static func namesTrace(_ value: String) -> Bool {
        value.split(separator: ",").contains {
            let method = $0.trimmingCharacters().uppercased()
            return method == "TRACE" || method == "TRACK"
        }
    }

    /// Whether `Sec-Fetch-Site` refuses the request (Go's `net/http.CrossOriginProtection`, but
    /// for every method: an `<img>` or a link makes a credentialed GET). `same-origin` and
    /// `none` (typed by the user) pass; `same-site` passes only with an allowed `Origin`;
    /// `cross-site` and unknown values are refused. Absent, the `Origin` check alone decides.
    static func refusesCrossSite(fetchSite: String?, origin: String?, access: AccessPolicy) -> Bool {
        guard let fetchSite else { return false }
        switch fetchSite.trimmingCharacters().lowercased() {
        case "same-origin", "none": return false
        case "same-site": return !(origin.map(access.originAllowed) ?? false)
        default: return true
        }
    }
}
