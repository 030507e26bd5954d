import Testing

@testable import Proxy

@Suite("RequestTarget")
struct RequestTargetTests {
    @Test("origin-form without a query")
    func originForm() {
        let target = RequestTarget("/accounts/me")
        #expect(target.path == "/accounts/me")
        #expect(target.query == nil)
        #expect(target.authority == nil)
    }

    @Test("origin-form with a query, split at the first '?'")
    func originFormQuery() {
        let target = RequestTarget("/search?q=a?b&x=1")
        #expect(target.path == "/search")
        #expect(target.query == "q=a?b&x=1")
        #expect(target.authority == nil)
    }

    @Test("an empty query is kept as empty, not absent")
    func emptyQuery() {
        #expect(RequestTarget("/p?").query == "")
    }

    @Test("absolute-form gives authority, path and query")
    func absoluteForm() {
        let target = RequestTarget("http://host:8080/p?q")
        #expect(target.authority == "host:8080")
        #expect(target.path == "/p")
        #expect(target.query == "q")
    }

    @Test(
        "absolute-form without a path has path '/'",
        arguments: ["http://host", "http://host:8080", "https://h.example"])
    func absoluteFormNoPath(target: String) {
        let parsed = RequestTarget(target)
        #expect(parsed.path == "/")
        #expect(parsed.query == nil)
        #expect(parsed.authority != nil)
    }

    @Test("absolute-form with a query but no path")
    func absoluteFormQueryNoPath() {
        let target = RequestTarget("http://host?x=1")
        #expect(target.authority == "host")
        #expect(target.path == "/")
        #expect(target.query == "x=1")
    }

    @Test("absolute-form with an IPv6 authority")
    func absoluteFormIPv6() {
        let target = RequestTarget("http://[::1]:8080/a/b")
        #expect(target.authority == "[::1]:8080")
        #expect(target.path == "/a/b")
    }

    @Test("asterisk-form")
    func asterisk() {
        let target = RequestTarget("*")
        #expect(target.path == "*")
        #expect(target.query == nil)
        #expect(target.authority == nil)
    }

    @Test(
        "only a first colon followed by '//' starts an authority",
        arguments: [
            ("foo:bar", "foo:bar", nil as String?, nil as String?), ("http:/x?q", "http:/x", nil, "q"),
            ("http://", "/", "", nil), ("a:b://h/p", "a:b://h/p", nil, nil), ("http://h/p?a?b", "/p", "h", "a?b"),
        ])
    func colonForms(target: String, path: String, authority: String?, query: String?) {
        let parsed = RequestTarget(target)
        #expect(parsed.path == Substring(path))
        #expect(parsed.authority.map(String.init) == authority)
        #expect(parsed.query.map(String.init) == query)
    }

    @Test("a '://' inside an origin-form path does not make it absolute")
    func schemeLookalikeInPath() {
        let target = RequestTarget("/redirect?to=http://evil/x")
        #expect(target.authority == nil)
        #expect(target.path == "/redirect")
        #expect(target.query == "to=http://evil/x")
    }
}

@Suite("HostName")
struct HostNameTests {
    @Test(
        "hostPart drops the port",
        arguments: [
            ("localhost:8080", "localhost"), ("localhost", "localhost"), ("127.0.0.1:80", "127.0.0.1"),
            ("[::1]:8080", "[::1]"), ("[::1]", "[::1]"), ("[fe80::1%25eth0]:1", "[fe80::1%25eth0]"),
        ])
    func hostPart(value: String, expected: String) {
        #expect(HostName.hostPart(Substring(value)) == Substring(expected))
    }

    @Test("hostPart keeps the case as written (isAllowed compares case-insensitively)")
    func hostPartKeepsCase() {
        #expect(HostName.hostPart("Example.COM:8080") == "Example.COM")
    }

    @Test(
        "isAllowed compares the same host part that hostPart returns",
        arguments: ["h:1", "H", "[::1]:8080", "[::1]", "[::1", "a:b:c", ":80", "", "[]:1", "x]:1"])
    func isAllowedUsesHostPart(value: String) {
        let part = String(HostName.hostPart(Substring(value))).lowercased()
        #expect(HostName.isAllowed(Substring(value), [part]))
        #expect(!HostName.isAllowed(Substring(value), [part + "x"]))
    }

    @Test("isAllowed ignores case and port")
    func isAllowedCaseAndPort() {
        let allowed = ["localhost", "127.0.0.1", "[::1]", "api.example.com"]
        for host in [
            "localhost", "LOCALHOST", "LocalHost:8080", "127.0.0.1:1", "[::1]:8080", "[::1]", "API.Example.com:443",
        ] {
            #expect(HostName.isAllowed(Substring(host), allowed), "\(host)")
        }
    }

    @Test("isAllowed refuses other hosts and look-alikes")
    func isAllowedRefuses() {
        let allowed = ["localhost", "[::1]"]
        for host in [
            "evil.com", "localhost.evil.com", "evil.com:localhost", "[::2]:8080", "::1", "", "[::1", "localhos",
        ] {
            #expect(!HostName.isAllowed(Substring(host), allowed), "\(host)")
        }
    }
}
