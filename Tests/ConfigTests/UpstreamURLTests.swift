import Testing

@testable import Config

struct UpstreamURLTests {
    static let valid: [(text: String, scheme: String, host: String, port: UInt16, path: String, query: String?)] = [
        ("http://127.0.0.1:9000/", "http", "127.0.0.1", 9000, "/", nil),
        ("https://platform.pennlabs.org/accounts/", "https", "platform.pennlabs.org", 443, "/accounts/", nil),
        ("HTTPS://API.Example.COM", "https", "api.example.com", 443, "/", nil),
        ("http://example.com?x=1", "http", "example.com", 80, "/", "x=1"),
        ("http://[::1]:8080/a%20b", "http", "[::1]", 8080, "/a%20b", nil),
        ("https://[2001:DB8::1]/", "https", "[2001:db8::1]", 443, "/", nil),
        ("http://my_service:80/x/y?a=b&c", "http", "my_service", 80, "/x/y", "a=b&c"),
        (
            "https://idp.example/.well-known/openid-configuration", "https", "idp.example", 443,
            "/.well-known/openid-configuration", nil
        ),
    ]

    @Test("valid URLs split into scheme, lowercased host, port, path and query", arguments: valid)
    func parsesValid(text: String, scheme: String, host: String, port: UInt16, path: String, query: String?) throws {
        let url = try #require(UpstreamURL.parse(text))
        #expect(url.scheme == scheme)
        #expect(url.host == host)
        #expect(url.port == port)
        #expect(url.path == path)
        #expect(url.query == query)
    }

    static let invalid = [
        "", "example.com", "//example.com/", "ftp://example.com/", "file:///etc/passwd", "http://",
        "http:///path", "http://user@example.com/", "http://user:pw@example.com/", "http://example.com/#frag",
        "http://example.com:/", "http://example.com:0/", "http://example.com:65536/", "http://example.com:-1/",
        "http://example.com:80a/", "http://exa mple.com/", "http://example.com/a b", "http://[::1/",
        "http://[zz::1]/", "http://::1/", "http://999.1.1.1/", "http://.example.com/", "http://a..b/",
        "http://exa%41mple.com/", "http://example.com\n/", "javascript:alert(1)",
    ]

    @Test(
        "URLs that are not absolute http(s), or have user info, fragments or bad ports, are refused", arguments: invalid
    )
    func refusesInvalid(text: String) {
        #expect(UpstreamURL.parse(text) == nil)
    }

    @Test("hostPort always has the port; origin and description leave out the default one")
    func derivedStrings() throws {
        let plain = try #require(UpstreamURL.parse("https://Example.com/a?b=c"))
        #expect(plain.hostPort == "example.com:443")
        #expect(plain.origin == "https://example.com")
        #expect(plain.description == "https://example.com/a?b=c")
        #expect(plain.hasDefaultPort)
        let ported = try #require(UpstreamURL.parse("http://[::1]:8080"))
        #expect(ported.hostPort == "[::1]:8080")
        #expect(ported.origin == "http://[::1]:8080")
        #expect(ported.description == "http://[::1]:8080/")
        #expect(UpstreamURL.parse("http://example.com:80/")?.origin == "http://example.com")
    }

    @Test("a copy with a new path and query keeps the origin; equality and hashing compare the parts")
    func copiesAndEquality() throws {
        let base = try #require(UpstreamURL.parse("http://127.0.0.1:8081/api"))
        var copy = base
        copy.path = "/api/me"
        copy.query = "x=1"
        #expect(copy.description == "http://127.0.0.1:8081/api/me?x=1")
        #expect(base.description == "http://127.0.0.1:8081/api")
        #expect(copy == UpstreamURL(scheme: "http", host: "127.0.0.1", port: 8081, path: "/api/me", query: "x=1"))
        #expect(copy != base)
        #expect(UpstreamURL(scheme: "http", host: "h", port: 80) == UpstreamURL(scheme: "http", host: "h"))
        #expect(UpstreamURL(scheme: "http", host: "h", port: 81) != UpstreamURL(scheme: "http", host: "h"))
        #expect(
            Set([copy, UpstreamURL(scheme: "http", host: "127.0.0.1", port: 8081, path: "/api/me", query: "x=1")]).count
                == 1)
    }

    @Test("a private copy is the same URL with storage of its own")
    func privateCopy() throws {
        let base = try #require(
            UpstreamURL.parse("https://a-long-upstream-host-name.example:8443/a/long/base/path?q=1"))
        let copy = base.privateCopy()
        #expect(copy == base)
        #expect(copy.description == base.description)
        #expect(copy.origin == "https://a-long-upstream-host-name.example:8443")
        func storage(_ text: String) -> UnsafeRawPointer? {
            var text = text
            return text.withUTF8 { UnsafeRawPointer($0.baseAddress) }
        }
        #expect(storage(copy.host) != storage(base.host))
        #expect(storage(copy.origin) != storage(base.origin))
        #expect(storage(copy.path) != storage(base.path))
    }
}

struct ListenAddressTests {
    static let valid: [(String, ListenAddress, String)] = [
        ("127.0.0.1:8080", .tcp(host: "127.0.0.1", port: 8080), "127.0.0.1:8080"),
        ("0.0.0.0:80", .tcp(host: "0.0.0.0", port: 80), "0.0.0.0:80"),
        ("[::1]:8080", .tcp(host: "::1", port: 8080), "[::1]:8080"),
        ("[::]:0", .tcp(host: "::", port: 0), "[::]:0"),
        ("localhost:0", .tcp(host: "localhost", port: 0), "localhost:0"),
        ("unix:/run/p.sock", .unix(path: "/run/p.sock"), "unix:/run/p.sock"),
        ("unix:sock/p.sock", .unix(path: "/etc/platform-proxy/sock/p.sock"), "unix:/etc/platform-proxy/sock/p.sock"),
    ]

    @Test("listen entries parse into TCP or Unix addresses and print back canonically", arguments: valid)
    func parsesValid(text: String, expected: ListenAddress, printed: String) throws {
        let address = try ListenAddress.validate(text, relativeTo: testDirectory).get()
        #expect(address == expected)
        #expect(address.description == printed)
    }

    static let invalid = [
        "8080", ":8080", "127.0.0.1", "127.0.0.1:", "127.0.0.1:65536", "example.com:80", "::1:8080",
        "[::1]8080", "[127.0.0.1]:80", "unix:", "256.0.0.1:80", "127.0.0.1:+80",
        "unix:/" + String(repeating: "a", count: 120),
    ]

    @Test(
        "listen entries without a port, with a DNS name, or with an overlong socket path are refused",
        arguments: invalid)
    func refusesInvalid(text: String) {
        #expect((try? ListenAddress.validate(text, relativeTo: testDirectory).get()) == nil)
    }
}
