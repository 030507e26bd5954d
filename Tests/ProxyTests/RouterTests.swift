import Config
import Testing

@testable import Proxy

private func router(_ paths: [String]) -> Router {
    Router(
        routes: paths.enumerated().map { index, path in
            RouteConfiguration(name: "r\(index)", path: path, upstream: nil, mock: MockConfiguration(directory: "/tmp"))
        })
}

/// The matched route's configured path and the rest, or nil.
private func match(_ paths: [String], _ path: String) -> (String, String)? {
    guard let (route, rest) = router(paths).match(Substring(path)) else { return nil }
    return (paths[route.index], String(rest))
}

@Suite("Router")
struct RouterTests {
    @Test("the longest matching prefix wins, whatever the config order")
    func longestPrefixWins() {
        for paths in [["/api", "/api/v2", "/api/v2/admin"], ["/api/v2/admin", "/api", "/api/v2"]] {
            #expect(match(paths, "/api/v2/admin/x")! == ("/api/v2/admin", "/x"))
            #expect(match(paths, "/api/v2/users")! == ("/api/v2", "/users"))
            #expect(match(paths, "/api/v3")! == ("/api", "/v3"))
            #expect(match(paths, "/api/v2admin")! == ("/api", "/v2admin"))
        }
    }

    @Test(
        "a prefix matches only on a segment boundary",
        arguments: [
            ("/accounts", ""), ("/accounts/", "/"), ("/accounts/me", "/me"), ("/accounts/me/x", "/me/x"),
        ])
    func segmentBoundary(path: String, rest: String) {
        #expect(match(["/accounts/"], path)! == ("/accounts/", rest))
        #expect(match(["/accounts"], path)! == ("/accounts", rest))
    }

    @Test(
        "a prefix does not match a longer segment",
        arguments: ["/accountsX", "/accounts-x/y", "/account", "/", "/x/accounts"])
    func noPartialSegment(path: String) {
        #expect(match(["/accounts/"], path) == nil)
    }

    @Test("the root route catches every path not claimed by a longer route")
    func rootCatchesAll() {
        let paths = ["/", "/accounts"]
        #expect(match(paths, "/")! == ("/", "/"))
        #expect(match(paths, "/anything/else")! == ("/", "/anything/else"))
        #expect(match(paths, "/accountsX")! == ("/", "/accountsX"))
        #expect(match(paths, "/accounts/me")! == ("/accounts", "/me"))
    }

    @Test("no match is nil")
    func noMatch() {
        #expect(match(["/a", "/b/c"], "/c") == nil)
        #expect(match(["/a", "/b/c"], "/b") == nil)
        #expect(match([], "/a") == nil)
    }

    @Test("the rest is always empty or begins with '/'")
    func restShape() {
        let paths = ["/", "/a", "/a/b/", "/ab", "/x/y/z"]
        let probes = [
            "/", "/a", "/a/", "/ab", "/abc", "/a/b", "/a/bc", "/a/b/c", "/x/y", "/x/y/z", "/x/y/zz", "/x/y/z/",
        ]
        for probe in probes {
            guard let (_, rest) = match(paths, probe) else {
                Issue.record("\(probe) unmatched")
                continue
            }
            #expect(rest.isEmpty || rest.hasPrefix("/"), "rest of \(probe) is \(rest)")
        }
    }

    @Test("the index is the route's position in the configuration")
    func indexIsConfigOrder() {
        let r = router(["/z", "/a", "/m/n"])
        #expect(r.match("/a/1")?.route.index == 1)
        #expect(r.match("/m/n")?.route.index == 2)
        #expect(r.match("/z")?.route.index == 0)
    }

    @Test("a non-ASCII prefix keeps the segment boundary")
    func nonASCIIPrefix() {
        #expect(match(["/café"], "/café/x").map { $0.1 } == "/x")
    }
}
