import Config
import HTTP1

/// Local security (docs/security.md): which Host and Origin values are
/// served, and the optional proxy key. DNS rebinding is defeated by the Host check, cross-site
/// requests from a browser by the Origin check, other local processes by the key.
struct AccessPolicy: Sendable {
    /// `allowedHosts`, lowercased.
    let allowedHosts: [String]
    /// The `apiKey` bytes, when set.
    let apiKey: [UInt8]?

    init(allowedHosts: [String], apiKey: String?) {
        self.allowedHosts = allowedHosts.map { $0.lowercased() }
        self.apiKey = apiKey.map { Array($0.utf8) }
    }

    private init(allowedHosts: [String], keyBytes apiKey: [UInt8]?) {
        self.allowedHosts = allowedHosts
        self.apiKey = apiKey
    }

    /// The same policy with its own copy of every list and string, for one event loop
    /// (nothing shared is written: a reference count moved per request would move between cores).
    func privateCopy() -> AccessPolicy {
        AccessPolicy(allowedHosts: allowedHosts.map { $0.privateCopy() }, keyBytes: apiKey.map { Array($0) })
    }

    /// Whether a Host value (or an absolute-form authority) names an allowed host; the port is ignored.
    func hostAllowed(_ host: Substring) -> Bool { HostName.isAllowed(host, allowedHosts) }

    /// `hostAllowed` for a Host value's bytes in the head.
    func hostAllowed(bytes host: UnsafeBufferPointer<UInt8>) -> Bool { HostName.isAllowed(bytes: host, allowedHosts) }

    /// Whether an `Origin` (`scheme://host[:port]`) names an allowed host; `null` and garbage never do.
    func originAllowed(_ origin: String) -> Bool {
        guard let schemeEnd = origin.firstRange(ofText: "://") else { return false }
        let scheme = origin[..<schemeEnd.lowerBound].lowercased()
        guard scheme == "http" || scheme == "https" else { return false }
        let authority = origin[schemeEnd.upperBound...]
        // The Host header's own syntax: no list, path, user information or blank, a port of 1–5
        // digits. The allow-list check reads up to the first `:` only (so
        // `http://localhost:8080, null`, two lines joined, would pass as localhost).
        guard HTTPHeadSemantics.isValidHost(authority) else { return false }
        return hostAllowed(authority)
    }

    /// Whether `given` equals the key, in time independent of where they differ.
    func keyAccepted(_ given: String?) -> Bool {
        guard let apiKey else { return true }
        guard let given, !apiKey.isEmpty else { return false }
        let bytes = Array(given.utf8)
        // Always walk the whole key: the time depends on the key's length only.
        var difference = bytes.count ^ apiKey.count
        for i in 0..<apiKey.count {
            difference |= Int(apiKey[i] ^ (i < bytes.count ? bytes[i] : 0))
        }
        return difference == 0
    }
}
