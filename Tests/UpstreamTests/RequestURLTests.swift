import Testing

@testable import Upstream

@Suite("RequestURL")
struct RequestURLTests {
    @Test(
        "the C string libcurl gets is the joined URL, for parts and for a whole URL, short or long",
        arguments: [
            RequestURL(origin: "http://127.0.0.1:8081", path: "/base/x", query: nil),
            RequestURL(origin: "https://api.example", path: "/", query: "a=1&b=%20"),
            RequestURL(
                origin: "http://h", path: "/" + String(repeating: "p", count: 9000),
                query: String(repeating: "q", count: 9000)),
            RequestURL("https://whole.example/path?x=y"),
        ])
    func cStringIsTheJoinedURL(url: RequestURL) {
        let passed = url.withCString { String(cString: $0) }
        #expect(passed == url.description)
        #expect(passed == url.origin + url.path + (url.query.map { "?" + $0 } ?? ""))
    }

    @Test("https is told from the scheme, whole or in parts")
    func https() {
        #expect(RequestURL(origin: "https://a", path: "/", query: nil).isHTTPS)
        #expect(RequestURL("https://a/").isHTTPS)
        #expect(!RequestURL(origin: "http://a", path: "/https:", query: nil).isHTTPS)
        #expect(!RequestURL("http://https.example/").isHTTPS)
    }
}
