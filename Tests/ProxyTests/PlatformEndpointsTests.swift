import HTTP1
import Testing

@testable import Proxy

private func head(_ method: String) -> HTTPRequestHead {
    var parser = HTTPRequestHeadParser()
    let bytes = Array("\(method) /_platform/auth HTTP/1.1\r\nHost: localhost\r\n\r\n".utf8)
    guard case .complete(let head, _) = bytes.withUnsafeBytes({ parser.parse($0) }) else { fatalError("no head") }
    return head
}

@Suite("PlatformEndpoints")
struct PlatformEndpointsTests {
    @Test(
        "every /_platform path answers 405 with its own Allow set",
        arguments: [
            ("/_platform/health", "GET"), ("/_platform/ready", "GET"), ("/_platform/metrics", "GET"),
            ("/_platform/login/journey", "POST"), ("/_platform/login/journey/step-1", "POST"),
            ("/_platform/auth", "GET"), ("/_platform/auth/events", "GET"), ("/_platform/login", "GET"),
            ("/_platform/callback", "GET"), ("/_platform/userinfo", "GET"), ("/_platform/login/device", "POST"),
            ("/_platform/login/demo", "POST"), ("/_platform/logout", "POST"), ("/_platform/analytics/events", "POST"),
            ("/_platform/analytics/operations/begin", "POST"), ("/_platform/analytics/unknown", "POST"),
            ("/_platform/experiments", "GET"), ("/_platform/experiments/checkout", "GET, PUT, DELETE"),
            ("/_platform/mock", "POST"),
        ])
    func allowSets(path: String, allow: String) {
        #expect(ProxyHandler.platformEndpoints.endpoint(for: Substring(path))?.allow == allow)
    }

    @Test(
        "paths beside the endpoints are no endpoint (404 no_route)",
        arguments: [
            "/_platform", "/_platform/", "/_platform/login/journeyX", "/_platform/experimentsX", "/_platform/analytics",
            "/_platform/auth/", "/_platform/mock/x", "/_platform/metricsX", "/_platform/nothing",
        ])
    func unknownPaths(path: String) {
        #expect(ProxyHandler.platformEndpoints.endpoint(for: Substring(path)) == nil)
    }

    @Test("every exact path is answered by its own entry, not an earlier one")
    func exactPathsFirst() {
        for endpoint in ProxyHandler.platformEndpoints.endpoints {
            guard case .exact(let path) = endpoint.path else { continue }
            #expect(ProxyHandler.platformEndpoints.endpoint(for: Substring(path))?.path == endpoint.path, "\(path)")
        }
    }

    @Test("the metrics listener serves metrics, health and readiness, GET only")
    func metricsListener() {
        for path in ["/metrics", "/_platform/metrics", "/_platform/health", "/_platform/ready"] {
            #expect(ProxyHandler.metricsListenerEndpoints.endpoint(for: Substring(path))?.allow == "GET", "\(path)")
        }
        #expect(ProxyHandler.metricsListenerEndpoints.endpoint(for: "/_platform/auth") == nil)
    }

    @Test("GET takes HEAD too; other methods match only themselves, case-sensitively")
    func methods() {
        #expect(PlatformEndpoints.Method.get.matches(head("GET")))
        #expect(PlatformEndpoints.Method.get.matches(head("HEAD")))
        #expect(!PlatformEndpoints.Method.get.matches(head("POST")))
        #expect(PlatformEndpoints.Method.post.matches(head("POST")))
        #expect(!PlatformEndpoints.Method.post.matches(head("post")))
        #expect(PlatformEndpoints.Method.put.matches(head("PUT")))
        #expect(PlatformEndpoints.Method.delete.matches(head("DELETE")))
    }

    @Test("path patterns: exact, a subtree on a segment boundary, and a prefix")
    func patterns() {
        #expect(PlatformEndpoints.Path.exact("/a").matches("/a"))
        #expect(!PlatformEndpoints.Path.exact("/a").matches("/a/"))
        #expect(PlatformEndpoints.Path.subtree("/a").matches("/a"))
        #expect(PlatformEndpoints.Path.subtree("/a").matches("/a/b"))
        #expect(!PlatformEndpoints.Path.subtree("/a").matches("/ab"))
        #expect(PlatformEndpoints.Path.below("/a/").matches("/a/"))
        #expect(!PlatformEndpoints.Path.below("/a/").matches("/a"))
    }
}
