import Config

/// Longest-prefix routing on a segment boundary (README "Configuration").
///
/// A prefix matches the path equal to it (without its trailing slash) or any path continuing
/// it with "/": `/accounts/` matches `/accounts`, `/accounts/` and `/accounts/me`, not `/accountsX`.
public struct Router: Sendable {
    private struct Entry: Sendable {
        var prefix: String
        var index: Int
    }

    private let entries: [Entry]

    /// Compiles the routes, longest prefix first.
    public init(routes: [RouteConfiguration]) {
        entries = routes.enumerated().map { index, route in
            var prefix = route.path
            while prefix.count > 1 && prefix.hasSuffix("/") { prefix.removeLast() }
            return Entry(prefix: prefix, index: index)
        }.sorted { $0.prefix.utf8.count > $1.prefix.utf8.count }
    }

    /// The matching route's index and the rest of the path after the prefix ("" or starting with "/").
    public func match(_ path: Substring) -> (index: Int, rest: Substring)? {
        for entry in entries {
            if entry.prefix == "/" { return (entry.index, path) }
            guard path.utf8.starts(with: entry.prefix.utf8) else { continue }
            let rest = Substring(path.utf8.dropFirst(entry.prefix.utf8.count))
            if rest.isEmpty || rest.first == "/" { return (entry.index, rest) }
        }
        return nil
    }
}
