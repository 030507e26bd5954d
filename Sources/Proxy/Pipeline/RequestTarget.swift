import Glibc
import HTTP1

/// A request target split into the parts routing needs.
public struct RequestTarget: Sendable, Equatable {
    /// The path, beginning with "/" ("*" for `OPTIONS *`).
    public let path: Substring
    /// The query without "?", if any.
    public let query: Substring?
    /// The authority of an absolute-form target, which replaces Host (RFC 9112 §3.2.2).
    public let authority: Substring?

    /// Splits origin-form, absolute-form (`http://host/path?q`) and asterisk-form targets.
    /// Works on the UTF-8 bytes (every delimiter is ASCII): no Character is formed, and the
    /// delimiters are found with `memchr` rather than by walking string indexes. (The parts are
    /// `let`s: an optional `var` starts as nil, and the value was then built aside and copied out,
    /// a retain and a release of each part.)
    public init(_ target: String) {
        let utf8 = target.utf8
        // Byte offsets of the authority, the path and the query mark, found in one borrow.
        let (authority, pathStart, mark): (Range<Int>?, Int, Int?) = target.withUTF8Bytes { bytes in
            guard let base = bytes.baseAddress else { return (nil, 0, nil) }
            func find(_ byte: UInt8, from start: Int) -> Int? {
                guard start < bytes.count, let hit = memchr(base + start, Int32(byte), bytes.count - start) else {
                    return nil
                }
                return base.distance(to: hit.assumingMemoryBound(to: UInt8.self))
            }
            var authority: Range<Int>?
            var pathStart = 0
            if bytes.first != UInt8(ascii: "/") && !(bytes.count == 1 && bytes[0] == UInt8(ascii: "*")),
                let colon = find(UInt8(ascii: ":"), from: 0), colon + 2 < bytes.count,
                bytes[colon + 1] == UInt8(ascii: "/"), bytes[colon + 2] == UInt8(ascii: "/")
            {
                let hostStart = colon + 3
                var end = hostStart
                while end < bytes.count && bytes[end] != UInt8(ascii: "/") && bytes[end] != UInt8(ascii: "?") {
                    end += 1
                }
                authority = hostStart..<end
                pathStart = end
            }
            return (authority, pathStart, find(UInt8(ascii: "?"), from: pathStart))
        }
        if authority == nil && mark == nil {
            // Origin form without a query, the usual target: the path is all of it (a substring
            // of the whole needs no index checked against the string's scalars).
            (self.authority, path, query) = (nil, target[...], nil)
            return
        }
        func index(_ offset: Int) -> String.Index { utf8.index(utf8.startIndex, offsetBy: offset) }
        self.authority = authority.map { target[index($0.lowerBound)..<index($0.upperBound)] }
        let end = mark ?? utf8.count
        if authority != nil && pathStart == end {
            // `http://host` or `http://host?q`: the path is "/".
            path = "/"
        } else {
            path = target[index(pathStart)..<index(end)]
        }
        query = mark.map { target[index($0 + 1)...] }
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
        host.withUTF8Bytes { isAllowed(bytes: $0, allowed) }
    }

    /// `isAllowed` for a field value's bytes in the head (a String or Substring made of it would
    /// be made, or retained, per request).
    static func isAllowed(bytes value: UnsafeBufferPointer<UInt8>, _ allowed: [String]) -> Bool {
        // `hostPart`, on the bytes: every request asks.
        var end = value.count
        if value.first == UInt8(ascii: "[") {
            if let close = value.firstIndex(of: UInt8(ascii: "]")) { end = close + 1 }
        } else if let colon = value.firstIndex(of: UInt8(ascii: ":")) {
            end = colon
        }
        let written = UnsafeBufferPointer(rebasing: value[..<end])
        return allowed.contains { name in
            guard name.utf8.count == written.count else { return false }
            return name.withUTF8Bytes { lowered in
                for i in 0..<lowered.count where lowered[i] != asciiLower(written[i]) { return false }
                return true
            }
        }
    }
}
