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
        let queries = [upstream.query, query.map(String.init)].compactMap { $0 }.filter { !$0.isEmpty }
        return UpstreamURL(scheme: upstream.scheme, host: upstream.host, port: upstream.port, path: path,
                           query: queries.isEmpty ? nil : queries.joined(separator: "&"))
    }

    /// Whether `path` has a `.` or `..` segment, written plainly or percent-encoded. Such paths
    /// are refused: normalising them could walk out of a route's prefix on the upstream.
    static func hasDotSegment(_ path: Substring) -> Bool {
        for segment in path.split(separator: "/", omittingEmptySubsequences: false) {
            let lowered = segment.lowercased()
            if lowered == "." || lowered == ".." { return true }
            if lowered.contains("%2e") {
                let decoded = lowered.replacingAll("%2e", with: ".")
                if decoded == "." || decoded == ".." { return true }
            }
        }
        return false
    }
}

extension String {
    /// Every occurrence of `target` replaced by `replacement`.
    func replacingAll(_ target: String, with replacement: String) -> String {
        var result = ""
        var rest = Substring(self)
        while let range = rest.firstRange(of: target) {
            result += rest[..<range.lowerBound]
            result += replacement
            rest = rest[range.upperBound...]
        }
        return result + rest
    }
}
