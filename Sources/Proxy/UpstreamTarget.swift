import Config

/// Building the upstream URL of a request and checking its path.
enum UpstreamTarget {
    /// `upstream` with the rest of the client's path appended and the client's query kept.
    static func url(_ upstream: UpstreamURL, rest: Substring, query: Substring?) -> UpstreamURL {
        var path = upstream.path
        if !rest.isEmpty {
            if path.hasSuffix("/") { path.removeLast() }
            path += rest
        }
        let joined: String?
        switch (upstream.query.flatMap { $0.isEmpty ? nil : $0 }, query.flatMap { $0.isEmpty ? nil : $0 }) {
        case (nil, nil): joined = nil
        case (let route?, nil): joined = route
        case (nil, let client?): joined = String(client)
        case (let route?, let client?): joined = route + "&" + client
        }
        return UpstreamURL(scheme: upstream.scheme, host: upstream.host, port: upstream.port, path: path, query: joined)
    }

    /// Whether `path` has a `.` or `..` segment, written plainly or percent-encoded. Such paths
    /// are refused: normalising them could walk out of a route's prefix on the upstream.
    static func hasDotSegment(_ path: Substring) -> Bool {
        var dots = 0          // dots in the current segment, `.` or `%2e` alike
        var other = false     // anything else in it
        var i = path.utf8.startIndex
        let end = path.utf8.endIndex
        while i < end {
            let b = path.utf8[i]
            if b == UInt8(ascii: "/") {
                if !other && (dots == 1 || dots == 2) { return true }
                dots = 0
                other = false
            } else if b == UInt8(ascii: ".") {
                dots += 1
            } else if b == UInt8(ascii: "%"), isEncodedDot(path.utf8, at: i) {
                dots += 1
                i = path.utf8.index(i, offsetBy: 2)
            } else {
                other = true
            }
            i = path.utf8.index(after: i)
        }
        return !other && (dots == 1 || dots == 2)
    }

    /// Whether `%2e` / `%2E` starts at `i`.
    private static func isEncodedDot(_ utf8: Substring.UTF8View, at i: Substring.UTF8View.Index) -> Bool {
        guard let two = utf8.index(i, offsetBy: 1, limitedBy: utf8.endIndex), two < utf8.endIndex,
              let e = utf8.index(i, offsetBy: 2, limitedBy: utf8.endIndex), e < utf8.endIndex else { return false }
        return utf8[two] == UInt8(ascii: "2") && (utf8[e] == UInt8(ascii: "e") || utf8[e] == UInt8(ascii: "E"))
    }
}
