import Config
import Testing

@testable import Proxy

@Suite("UpstreamTarget.url")
struct UpstreamURLJoinTests {
    @Test(
        "the upstream URL is the route's path without its trailing slash, then the rest; the queries joined with &",
        arguments: ["", "/", "/base", "/base/", "/b/c/", "/é/"])
    func joinsPathAndQuery(base: String) throws {
        for routeQuery in [nil, "", "a=1"] as [String?] {
            let text = "https://api.example" + base + (routeQuery.map { "?" + $0 } ?? "")
            let upstream = try #require(UpstreamURL.parse(text), "\(text)")
            for rest in ["", "/", "/x", "/x/y/", "/ü%20z"] {
                for query in [nil, "", "b=2"] as [String?] {
                    // The same join, written plainly.
                    let path =
                        rest.isEmpty
                        ? upstream.path
                        : (upstream.path.hasSuffix("/") ? String(upstream.path.dropLast()) : upstream.path) + rest
                    let queries = [upstream.query, query].compactMap { $0 }.filter { !$0.isEmpty }
                    let url = UpstreamTarget.url(upstream, rest: Substring(rest), query: query.map { Substring($0) })
                    #expect(url.path == path, "\(text) + \(rest)")
                    #expect(
                        url.query == (queries.isEmpty ? nil : queries.joined(separator: "&")),
                        "\(text) + \(rest) ? \(query ?? "nil")")
                    #expect(url.origin == upstream.origin)
                }
            }
        }
    }
}
