/// A request target split into the parts routing needs.
public struct RequestTarget: Sendable, Equatable {
    /// The path, beginning with "/" ("*" for `OPTIONS *`).
    public var path: Substring
    /// The query without "?", if any.
    public var query: Substring?
    /// The authority of an absolute-form target, which replaces Host (RFC 9112 §3.2.2).
    public var authority: Substring?

    /// Splits origin-form, absolute-form (`http://host/path?q`) and asterisk-form targets.
    public init(_ target: String) {
        var rest = Substring(target)
        authority = nil
        if !rest.hasPrefix("/") && rest != "*", let colon = rest.firstIndex(of: ":"),
           rest[colon...].hasPrefix("://") {
            let afterScheme = rest[rest.index(colon, offsetBy: 3)...]
            let slash = afterScheme.firstIndex { $0 == "/" || $0 == "?" } ?? afterScheme.endIndex
            authority = afterScheme[..<slash]
            rest = afterScheme[slash...]
            if rest.isEmpty || rest.first == "?" { rest = "/" + rest }
        }
        if let mark = rest.firstIndex(of: "?") {
            path = rest[..<mark]
            query = rest[rest.index(after: mark)...]
        } else {
            path = rest
            query = nil
        }
    }
}

/// Host handling for the allowed-hosts check.
enum HostName {
    /// The host part of a Host value, as written: `Example.COM:8080` → `Example.COM`, `[::1]:80` → `[::1]`.
    static func hostPart(_ value: Substring) -> Substring {
        if value.first == "[" {
            if let close = value.firstIndex(of: "]") { return value[...close] }
            return value
        }
        if let colon = value.firstIndex(of: ":") { return value[..<colon] }
        return value
    }

    /// Whether `host` (any case) is in the lowercased `allowed` list.
    static func isAllowed(_ host: Substring, _ allowed: [String]) -> Bool {
        let part = hostPart(host).lowercased()
        return allowed.contains { $0 == part }
    }
}
