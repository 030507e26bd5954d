import Config
import HTTP1

/// Building the upstream URL of a request and checking its path.
enum UpstreamTarget {
    /// `upstream` with the rest of the client's path appended and the client's query kept.
    static func url(_ upstream: UpstreamURL, rest: Substring, query: Substring?) -> UpstreamURL {
        var path = upstream.path
        if !rest.isEmpty {
            // The route's path without its trailing "/", then the rest (which begins with one);
            // on the bytes, as String's own `last` and `dropLast` walk Unicode indexes.
            path = path.withUTF8 { base in
                let kept = base.last == UInt8(ascii: "/") ? base.count - 1 : base.count
                return String.build(capacity: kept + rest.utf8.count) {
                    $0.put(utf8: UnsafeBufferPointer(rebasing: base[..<kept]))
                    $0.put(rest)
                }
            }
        }
        let joined: String?
        switch (upstream.query.flatMap { $0.isEmpty ? nil : $0 }, query.flatMap { $0.isEmpty ? nil : $0 }) {
        case (nil, nil): joined = nil
        case (let route?, nil): joined = route
        case (nil, let client?): joined = String(client)
        case (let route?, let client?):
            joined = String.build(capacity: route.utf8.count + 1 + client.utf8.count) {
                $0.put(route)
                $0.put("&")
                $0.put(client)
            }
        }
        // A copy with the new path and query keeps the route's origin text.
        var url = upstream
        url.path = path
        url.query = joined
        return url
    }

    /// Whether `path` has a `.` or `..` segment, written plainly or percent-encoded. Such paths
    /// are refused: normalising them could walk out of a route's prefix on the upstream.
    static func hasDotSegment(_ path: Substring) -> Bool { !isForwardable(path, encodedSlashes: .forward) }

    /// Whether `path` may go upstream: no `.`/`..` segment (plain or `%2e`), no `%00`, and with
    /// `.reject` no `%2F`/`%5C` (any case) and no raw `\` (not a URI character, and a separator
    /// to WHATWG URL parsers and IIS). With `.forward` those still end a segment for the dot
    /// check, because an upstream that decodes them sees `..%2F` or `..\` as `../`. A segment's
    /// name ends at `;` (path parameters), so `..;x` is a `..` segment, as Tomcat reads it.
    static func isForwardable(_ path: Substring, encodedSlashes: EncodedSlashes) -> Bool {
        // On the bytes with integer offsets: `Substring.UTF8View` indexes are checked and
        // re-validated at every step (~50 instructions a byte, counted).
        path.withUTF8Bytes { bytes in
            var dots = 0          // dots in the current segment's name, `.` or `%2e` alike
            var other = false     // anything else in it
            var parameters = false  // past a `;` in this segment: not part of its name
            var i = 0
            while i < bytes.count {
                var b = bytes[i]
                var separator = b == UInt8(ascii: "/")
                if b == UInt8(ascii: "\\") {
                    guard encodedSlashes == .forward else { return false }
                    separator = true
                } else if b == UInt8(ascii: "%"), let decoded = encodedByte(bytes, at: i) {
                    switch decoded {
                    case 0: return false
                    case UInt8(ascii: "/"), UInt8(ascii: "\\"):
                        guard encodedSlashes == .forward else { return false }
                        separator = true
                    default: break
                    }
                    b = decoded
                    i += 2
                }
                if separator {
                    if !other && (dots == 1 || dots == 2) { return false }
                    dots = 0
                    other = false
                    parameters = false
                } else if parameters {
                    // A parameter's bytes are not the segment's name.
                } else if b == UInt8(ascii: ";") {
                    parameters = true
                } else if b == UInt8(ascii: ".") {
                    dots += 1
                } else {
                    other = true
                }
                i += 1
            }
            return other || (dots != 1 && dots != 2)
        }
    }

    /// The byte a `%XY` starting at `i` stands for, or nil when two hex digits do not follow.
    private static func encodedByte(_ bytes: UnsafeBufferPointer<UInt8>, at i: Int) -> UInt8? {
        guard i + 2 < bytes.count, let high = hexValue(bytes[i + 1]), let low = hexValue(bytes[i + 2]) else { return nil }
        return high << 4 | low
    }

    private static func hexValue(_ b: UInt8) -> UInt8? {
        switch b {
        case 0x30...0x39: b - 0x30
        case 0x41...0x46: b - 0x37
        case 0x61...0x66: b - 0x57
        default: nil
        }
    }
}
