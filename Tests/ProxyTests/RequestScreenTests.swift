import Config
import HTTP1
import Testing

@testable import Proxy

@Suite("UpstreamTarget.isForwardable")
struct ForwardablePathTests {
    @Test(
        "encoded separators and NUL are refused in any case unless the route forwards slashes",
        arguments: [
            ("/a/b", EncodedSlashes.reject, true), ("/a%2Fb", .reject, false), ("/a%2fb", .reject, false),
            ("/a%5cb", .reject, false), ("/a%5Cb", .reject, false), ("/a%00b", .reject, false),
            ("/a%2Fb", .forward, true), ("/a%5cb", .forward, true), ("/a%00b", .forward, false),
            ("/..%2fsecret", .forward, false), ("/x/%2e%2e%2Fy", .forward, false), ("/.%2e%5cy", .forward, false),
            ("/a..%2fb", .forward, true), ("/%2", .reject, true), ("/%zz", .reject, true), ("/a%41b", .reject, true),
            ("/a/%2e/b", .forward, false), ("/a/.../b", .reject, true),
            // A raw backslash is refused like %5C, and ends a segment where it is forwarded.
            ("/public/..\\admin", .reject, false), ("/a\\b", .reject, false), ("/a\\b", .forward, true),
            ("/public/..\\admin", .forward, false), ("/a/x..\\b", .forward, true),
            // A segment's name ends at ";": "..;" is "..".
            ("/api/..;/x", .reject, false), ("/api/.;jsessionid=1/x", .reject, false), ("/api/..;", .forward, false),
            ("/a;p=1/b", .reject, true), ("/a;..", .reject, true), ("/api/;/x", .reject, true),
            ("/x/...;y", .reject, true),
            // What lenient upstreams decode further: twice-encoded, overlong, IIS %u, fullwidth, trailing spaces.
            ("/p/%252e%252e/admin", .forward, false), ("/p/..%252fadmin", .reject, false),
            ("/p/..%255Cadmin", .forward, false),
            ("/p/%2500", .reject, false), ("/p/%2525/x", .reject, true), ("/p/50%25off", .reject, true),
            ("/p/%c0%ae%c0%ae/admin", .forward, false), ("/p/%C1%9c", .forward, false),
            ("/p/%e0%80%ae/x", .forward, false),
            ("/p/caf%c3%a9/x", .reject, true), ("/p/%e2%82%ac", .reject, true),
            ("/p/%u002e%u002e/admin", .forward, false), ("/p/%U002F", .reject, false), ("/p/%u0000", .forward, false),
            ("/p/%u0041b", .reject, true), ("/p/%u4e2d", .reject, true),
            ("/p/%ef%bc%8e%ef%bc%8e/admin", .forward, false), ("/p/a%ef%bc%8eb", .reject, true),
            ("/p/%EF%BC%8Fx", .reject, false), ("/p/%ef%bc%8fx", .forward, true), ("/p/%ef%bc%a1", .reject, true),
            ("/p/..%20/admin", .reject, false), ("/p/.%20%20/x", .reject, false), ("/p/a%20b", .reject, true),
            ("/p/%20/x", .reject, true),
            // Decoded twice by other spellings, more lookalikes,
            // other blanks, the overlong four-byte form. A path once decoded is checked again.
            ("/p/%25%32%65%25%32%65/admin", .forward, false), ("/p/..%25%32%66x", .forward, false),
            ("/p/%25%30%30", .reject, false), ("/p/x%25%35%63..%25%35%63y", .forward, false),
            ("/p/%2%65%2%65/admin", .forward, false), ("/p/%%32%65%%32%65/admin", .forward, false),
            ("/p/%e2%80%a4%e2%80%a4/admin", .forward, false), ("/p/%ef%b9%92%ef%b9%92/admin", .forward, false),
            ("/p/%e2%80%a5/admin", .forward, false), ("/p/..%ef%b9%a8admin", .reject, false),
            ("/p/%uff0e%uff0e/admin", .forward, false), ("/p/%uFF0Fx", .reject, false),
            ("/p/..%u2215x", .forward, false),
            ("/p/%u2025/x", .forward, false), ("/p/%f0%80%80%ae/x", .forward, false),
            ("/p/..%09/x", .reject, false), ("/p/..%0d/x", .reject, false), ("/p/..%c2%a0/x", .reject, false),
            ("/p/..%2520/x", .reject, false),
            // ...and what is no such thing still goes: a once-decoded percent, other characters.
            ("/p/%2541", .reject, true), ("/p/100%2525", .reject, true), ("/p/%e2%80%a6", .reject, true),
            ("/p/%f0%9f%98%80", .reject, true), ("/p/%u00e9", .reject, true), ("/p/a%c2%a0b", .reject, true),
            ("/p/a%09b", .reject, true),
        ])
    func table(path: String, mode: EncodedSlashes, expected: Bool) {
        #expect(UpstreamTarget.isForwardable(Substring(path), encodedSlashes: mode) == expected)
    }

    @Test(
        "the path is judged as the slice of its request target: the query after it is not read",
        arguments: [
            ("/a/b?next=/../x", true), ("/a/b?%2e%2e", true), ("/a/..?q=1", false), ("http://h/a/%2e?x", false),
            ("/a%2F?x", false),
        ])
    func sliceOfTarget(target: String, expected: Bool) {
        #expect(UpstreamTarget.isForwardable(RequestTarget(target).path, encodedSlashes: .reject) == expected)
    }
}

@Suite("RequestScreen")
struct RequestScreenTests {
    private let access = AccessPolicy(allowedHosts: ["localhost", "127.0.0.1"], apiKey: nil)

    @Test(
        "Sec-Fetch-Site: cross-site and unknown values are refused; same-site only with an allowed Origin",
        arguments: [
            (nil, nil, false), ("same-origin", nil, false), ("none", nil, false), ("Same-Origin", nil, false),
            ("cross-site", nil, true), ("cross-site", "http://localhost:3000", true), ("same-site", nil, true),
            ("same-site", "http://evil.example", true), ("same-site", "http://localhost:3000", false),
            ("bogus", nil, true), ("", nil, true),
        ] as [(String?, String?, Bool)])
    func crossSite(site: String?, origin: String?, refused: Bool) {
        #expect(RequestScreen.refusesCrossSite(fetchSite: site, origin: origin, access: access) == refused)
    }

    @Test(
        "a field sent twice reads as both lines joined, which no check accepts; once, as itself",
        arguments: [
            (["Sec-Fetch-Site: same-origin"], "same-origin", nil),
            (["Sec-Fetch-Site: same-origin", "Sec-Fetch-Site: cross-site"], "same-origin, cross-site", nil),
            (
                ["Origin: http://localhost:3000", "X-A: 1", "origin: http://evil.example"], nil,
                "http://localhost:3000, http://evil.example"
            ),
            (
                ["Origin: http://localhost:3000", "Sec-Fetch-Site: same-site", "Sec-Fetch-Site: same-site"],
                "same-site, same-site", "http://localhost:3000"
            ),
        ] as [([String], String?, String?)])
    func repeatedFields(lines: [String], site: String?, origin: String?) {
        let text = "GET / HTTP/1.1\r\nHost: localhost\r\n" + lines.map { $0 + "\r\n" }.joined() + "\r\n"
        var parser = HTTPRequestHeadParser()
        guard case .complete(let head, _) = Array(text.utf8).withUnsafeBytes({ parser.parse($0) }) else {
            Issue.record("did not parse")
            return
        }
        let fields = RequestScreen.fields(head)
        #expect(fields.fetchSite == site)
        #expect(fields.origin == origin)
        if let site {
            #expect(
                RequestScreen.refusesCrossSite(fetchSite: site, origin: fields.origin, access: access)
                    == (lines.count > 1))
        }
        if let origin, origin.contains(", ") { #expect(!access.originAllowed(origin)) }
    }

    @Test(
        "an Origin is allowed only as scheme://host[:port] of an allowed host, nothing after the port",
        arguments: [
            ("http://localhost", true), ("http://localhost:3000", true), ("HTTPS://LOCALHOST:443", true),
            ("http://127.0.0.1:8080", true), ("http://localhost:8080, null", false),
            ("http://localhost:8080,null", false),
            ("http://localhost:8080, evil.example", false), ("http://localhost:x, evil.example", false),
            ("http://localhost:", false), ("http://localhost:123456", false), ("http://localhost:80 ", false),
            ("http://localhost:80/", false), ("http://user@localhost", false),
            ("http://localhost, http://localhost", false),
            ("http://evil.example", false), ("null", false), ("http://", false), ("http://[::1]:3000]", false),
            ("http://local]host", false),
        ] as [(String, Bool)])
    func originShapes(origin: String, allowed: Bool) {
        #expect(access.originAllowed(origin) == allowed)
    }

    @Test(
        "method overrides naming TRACE or TRACK, in any case or list position",
        arguments: [
            ("TRACE", true), ("track", true), (" Trace ", true), ("GET, TRACE", true), ("PATCH", false),
            ("TRACES", false), ("", false),
        ])
    func overrides(value: String, refused: Bool) {
        #expect(RequestScreen.namesTrace(value) == refused)
    }
}
