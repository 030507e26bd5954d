import HTTP1

/// A request target split into the parts routing needs.
public struct RequestTarget: Sendable, Equatable {
    /// The path, beginning with "/" ("*" for `OPTIONS *`).
    public var path: Substring
    /// The query without "?", if any.
    public var query: Substring?
    /// The authority of an absolute-form target, which replaces Host (RFC 9112 §3.2.2).
    public var authority: Substring?

    /// Splits origin-form, absolute-form (`http://host/path?q`) and asterisk-form targets.
    /// Works on UTF-8 code units (every delimiter is ASCII): no Character is formed.
    public init(_ target: String) {
        var rest = Substring(target)
        authority = nil
        let utf8 = rest.utf8
        if utf8.first != UInt8(ascii: "/") && rest != "*", let colon = utf8.firstIndex(of: UInt8(ascii: ":")),
           utf8[colon...].starts(with: "://".utf8) {
            let afterScheme = rest[utf8.index(colon, offsetBy: 3)...]
            let slash = afterScheme.utf8.firstIndex { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") }
                ?? afterScheme.endIndex
            authority = afterScheme[..<slash]
            rest = afterScheme[slash...]
            if rest.isEmpty || rest.utf8.first == UInt8(ascii: "?") { rest = "/" + rest }
        }
        if let mark = rest.utf8.firstIndex(of: UInt8(ascii: "?")) {
            path = rest[..<mark]
            query = rest[rest.utf8.index(after: mark)...]
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
        let utf8 = value.utf8
        if utf8.first == UInt8(ascii: "[") {
            if let close = utf8.firstIndex(of: UInt8(ascii: "]")) { return value[...close] }
            return value
        }
        if let colon = utf8.firstIndex(of: UInt8(ascii: ":")) { return value[..<colon] }
        return value
    }

    /// Whether `host` (any case) is in the lowercased `allowed` list (compared byte by byte,
    /// ASCII case ignored, without making a lowercased copy per request).
    static func isAllowed(_ host: Substring, _ allowed: [String]) -> Bool {
        var part = hostPart(host)
        return part.withUTF8 { written in
            allowed.contains { name in
                guard name.utf8.count == written.count else { return false }
                var name = name
                return name.withUTF8 { lowered in
                    for i in 0..<lowered.count where lowered[i] != asciiLower(written[i]) { return false }
                    return true
                }
            }
        }
    }
}
