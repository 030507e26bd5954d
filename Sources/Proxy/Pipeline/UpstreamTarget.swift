import Config
import HTTP1

/// Building the upstream URL of a request and checking its path.
enum UpstreamTarget {
    /// `upstream` with the rest of the client's path appended and the client's query kept.
    static func url(_ upstream: UpstreamURL, rest: Substring, query: Substring?) -> UpstreamURL {
        // The route's path without its trailing "/", then the rest (which begins with one).
        // Both are valid UTF-8 already: copied as strings, not revalidated as bytes. The
        // common route ("/api/" to an upstream's "/") keeps none of its path.
        let (kept, count) = upstream.path.withUTF8Bytes {
            ($0.last == UInt8(ascii: "/") ? $0.count - 1 : $0.count, $0.count)
        }
        let path: String
        if rest.isEmpty {
            path = upstream.path
        } else if kept == 0 {
            path = String(rest)
        } else if kept < count {
            path = String(upstream.path.utf8.dropLast())! + rest
        } else {
            path = upstream.path + rest
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
        // The route's origin text is kept.
        return upstream.replacing(path: path, query: joined)
    }

    /// Whether `path` has a `.` or `..` segment, written plainly or percent-encoded. Such paths
    /// are refused: normalising them could walk out of a route's prefix on the upstream.
    static func hasDotSegment(_ path: Substring) -> Bool { !isForwardable(path, encodedSlashes: .forward) }

    /// Whether `path` may go upstream: no `.`/`..` segment (plain or `%2e`), no `%00`, and with
    /// `.reject` no `%2F`/`%5C` (any case) and no raw `\` (not a URI character, and a separator
    /// to WHATWG URL parsers and IIS). With `.forward` those still end a segment for the dot
    /// check, because an upstream that decodes them sees `..%2F` or `..\` as `../`. A segment's
    /// name ends at `;` (path parameters), so `..;x` is a `..` segment, as Tomcat reads it.
    ///
    /// What lenient upstreams decode further is read the same way: a dot, separator or NUL
    /// encoded twice (`%252e`), an overlong UTF-8 form (`%c0%ae`; never valid UTF-8) or IIS's
    /// `%u002e` is refused or read as what it decodes to; a fullwidth dot (`%ef%bc%8e`, a dot
    /// after Unicode normalisation) is a dot, a fullwidth solidus a separator; and spaces do not
    /// make a name (Windows drops a trailing one: `..%20` is `..`).
    ///
    /// An upstream that decodes twice sees what the path is once decoded, so a path with an
    /// escape is checked again as that (`%25%32%65` is `%2e`, `%2%65` is `%2e` to a lenient
    /// decoder: a dot either way).
    static func isForwardable(_ path: Substring, encodedSlashes: EncodedSlashes) -> Bool {
        // On the bytes with integer offsets: `Substring.UTF8View` indexes are checked and
        // re-validated at every step (`bench/cost-profile.sh` counts the difference).
        path.withUTF8Bytes { bytes in
            guard isForwardable(bytes, encodedSlashes: encodedSlashes) else { return false }
            guard bytes.contains(UInt8(ascii: "%")) else { return true }
            return decodedOnce(bytes).withUnsafeBufferPointer { isForwardable($0, encodedSlashes: encodedSlashes) }
        }
    }

    /// `bytes` with each `%XY` replaced by its byte (anything else, a `%` without two hex digits
    /// included, as it is).
    private static func decodedOnce(_ bytes: UnsafeBufferPointer<UInt8>) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var i = 0
        while i < bytes.count {
            if bytes[i] == UInt8(ascii: "%"), let decoded = encodedByte(bytes, at: i) {
                out.append(decoded)
                i += 3
            } else {
                out.append(bytes[i])
                i += 1
            }
        }
        return out
    }

    private static func isForwardable(_ bytes: UnsafeBufferPointer<UInt8>, encodedSlashes: EncodedSlashes) -> Bool {
        do {
            var dots = 0  // dots in the current segment's name, `.` or `%2e` alike
            var other = false  // anything else in it
            var parameters = false  // past a `;` in this segment: not part of its name
            var i = 0
            while i < bytes.count {
                var b = bytes[i]
                if b == UInt8(ascii: "%") {
                    guard let (decoded, length) = decodedAt(bytes, i) else { return false }
                    b = decoded
                    i += length - 1
                    if b == UInt8(ascii: "/") || b == UInt8(ascii: "\\") {
                        // An encoded separator.
                        guard encodedSlashes == .forward else { return false }
                        b = UInt8(ascii: "/")
                    }
                } else if b == UInt8(ascii: "\\") {
                    guard encodedSlashes == .forward else { return false }
                    b = UInt8(ascii: "/")
                }
                if b == UInt8(ascii: "/") {
                    if !other && (dots == 1 || dots == 2) { return false }
                    dots = 0
                    other = false
                    parameters = false
                } else if parameters || b == UInt8(ascii: " ") || b == 0x09 || b == 0x0A || b == 0x0D {
                    // A parameter's bytes, and blanks (a space, a tab, CR, LF; an encoded
                    // no-break space reads as a space), are not the segment's name.
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

    /// What the escape at `i` (a `%`) stands for as the dot check reads it, and how many bytes it
    /// takes; nil when it must be refused (a NUL, or a dot, separator or NUL encoded twice, or an
    /// overlong UTF-8 form). An escape that is not one (`%zz`) is a plain `%`.
    private static func decodedAt(_ bytes: UnsafeBufferPointer<UInt8>, _ i: Int) -> (byte: UInt8, length: Int)? {
        if i + 5 < bytes.count, bytes[i + 1] | 0x20 == UInt8(ascii: "u"), let high = encodedByte(bytes, at: i + 1),
            let low = encodedByte(bytes, at: i + 3)
        {
            // IIS's %uXXXX: a code point below 0x80 is that byte.
            let point = UInt16(high) << 8 | UInt16(low)
            if point < 0x80 { return point == 0 ? nil : (UInt8(point), 6) }
            guard let lookalike = lookalike(point) else { return nil }
            return (lookalike, 6)
        }
        guard let decoded = encodedByte(bytes, at: i) else { return (UInt8(ascii: "%"), 1) }
        switch decoded {
        case 0: return nil
        case UInt8(ascii: "%"):
            // `%25XY`: decoded again by some upstreams.
            if let twice = encodedByte(bytes, at: i + 2),
                twice == 0 || twice == UInt8(ascii: ".") || twice == UInt8(ascii: "/") || twice == UInt8(ascii: "\\")
            {
                return nil
            }
        case 0xC0, 0xC1:
            return nil  // an overlong two-byte form (`%c0%ae` is `.`): never valid UTF-8
        case 0xC2:
            // A no-break space (U+00A0): Windows trims it from a name like a space.
            if encodedByte(bytes, at: i + 3) == 0xA0 { return (UInt8(ascii: " "), 6) }
        case 0xF0:
            // An overlong four-byte form: F0 followed by 80…8F.
            if let next = encodedByte(bytes, at: i + 3), next < 0x90 { return nil }
        case 0xE0:
            // An overlong three-byte form: E0 followed by 80…9F.
            if bytes.count > i + 5, bytes[i + 3] == UInt8(ascii: "%"), let next = encodedByte(bytes, at: i + 3),
                next < 0xA0
            {
                return nil
            }
        case 0xE2, 0xEF:
            // A dot, solidus or reverse solidus after Unicode normalisation (NFKC) or a best-fit
            // mapping: fullwidth (U+FF0E, FF0F, FF3C), small (U+FE52, FE68), the one-dot leader
            // (U+2024), the division slash (U+2215); the two-dot leader (U+2025) is refused.
            if let second = encodedByte(bytes, at: i + 3), let third = encodedByte(bytes, at: i + 6),
                bytes[i + 3] == UInt8(ascii: "%"), bytes[i + 6] == UInt8(ascii: "%")
            {
                let point = UInt16(decoded & 0x0F) << 12 | UInt16(second & 0x3F) << 6 | UInt16(third & 0x3F)
                if point == 0x2025 { return nil }
                if let lookalike = lookalike(point), lookalike != UInt8(ascii: "x") { return (lookalike, 9) }
            }
        default: break
        }
        return (decoded, 3)
    }

    /// What a code point of U+0080 and above reads as in a path: `.`, `/` or `\\` for the ones
    /// that become those after normalisation, `x` (a name's byte) for the rest; nil for the
    /// two-dot leader (U+2025, `..` after normalisation).
    private static func lookalike(_ point: UInt16) -> UInt8? {
        switch point {
        case 0xFF0E, 0xFE52, 0x2024: UInt8(ascii: ".")
        case 0xFF0F, 0x2215: UInt8(ascii: "/")
        case 0xFF3C, 0xFE68: UInt8(ascii: "\\")
        case 0x2025: nil
        default: UInt8(ascii: "x")
        }
    }

    /// The byte a `%XY` starting at `i` stands for, or nil when two hex digits do not follow.
    private static func encodedByte(_ bytes: UnsafeBufferPointer<UInt8>, at i: Int) -> UInt8? {
        guard i + 2 < bytes.count, let high = hexValue(bytes[i + 1]), let low = hexValue(bytes[i + 2]) else {
            return nil
        }
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
