import CCurl
import Testing

@testable import Upstream

/// What libcurl reads as a request's path and query from `handle`: the parts its transfer copies
/// out of the URL handle (`parseurlandfillconn`, flags 0). nil for a part that is not set.
private func parts(_ handle: OpaquePointer) -> (path: String?, query: String?) {
    func get(_ part: CURLUPart) -> String? {
        var text: UnsafeMutablePointer<CChar>?
        guard curl_url_get(handle, part, &text, 0) == CURLUE_OK, let text else { return nil }
        defer { curl_free(text) }
        return String(cString: text)
    }
    return (get(CURLUPART_PATH), get(CURLUPART_QUERY))
}

/// The parts libcurl reads when it parses `url` as a string, as it does for `CURLOPT_URL`.
private func partsParsed(_ url: String) -> (path: String?, query: String?)? {
    let handle = curl_url()!
    defer { curl_url_cleanup(handle) }
    let flags = UInt32(CURLU_GUESS_SCHEME | CURLU_NON_SUPPORT_SCHEME | CURLU_PATH_AS_IS)
    guard curl_url_set(handle, CURLUPART_URL, url, flags) == CURLUE_OK else { return nil }
    return parts(handle)
}

/// The parts libcurl reads when the origin is parsed and the path and query are set, as
/// `EasyHandle.setURL` does.
private func partsSet(origin: String, path: String, query: String?) -> (path: String?, query: String?) {
    let handle = curl_url()!
    defer { curl_url_cleanup(handle) }
    let flags = UInt32(CURLU_GUESS_SCHEME | CURLU_NON_SUPPORT_SCHEME | CURLU_PATH_AS_IS)
    precondition(curl_url_set(handle, CURLUPART_URL, origin + "/", flags) == CURLUE_OK)
    _ = curl_url_set(handle, CURLUPART_PATH, path, 0)
    _ = curl_url_set(handle, CURLUPART_QUERY, query, 0)
    return parts(handle)
}

@Suite("URL parts: what libcurl sends is the same whether it parses the URL or is given its parts")
struct URLPartsTests {
    static let paths = [
        "/", "/small", "//x//y", "/a/../b/./c", "/p;m=1", "/a%", "/%zz%4", "/%2f", "/%2F", "/b%2Fc",
        "/%c3%a9", "/%C3%A9", "/%Ab", "/%aB", "/caf\u{e9}", "/\u{1F600}", "/a b", "/a\tb", "/a#f",
        "/a?b", "/a\u{7F}", "/~user/!$&'()*+,=@:", "/" + String(repeating: "p", count: 4000),
    ]
    static let queries: [String?] = [
        nil, "", "a=1", "a=%2F&b=%2f", "q=caf\u{e9}", "x=1?y=2", "a=1#f", "a b", "%41=%61", "k=\u{7}",
    ]

    @Test("a part either goes as a part and reaches libcurl unchanged, or is told to go as a string")
    func partsAgreeWithTheParse() throws {
        for path in Self.paths {
            for query in Self.queries {
                let url = RequestURL(origin: "http://127.0.0.1:8081", path: path, query: query)
                let verbatim =
                    RequestURL.partIsVerbatim(path, query: false)
                    && (query.map { RequestURL.partIsVerbatim($0, query: true) } ?? true)
                guard verbatim else { continue }
                let parsed = try #require(
                    partsParsed(url.description), "libcurl refuses \(url) parsed, but it would go as parts")
                let set = partsSet(origin: url.origin, path: path, query: query)
                #expect(set.path == parsed.path, "path of \(url)")
                #expect(set.query == parsed.query, "query of \(url)")
            }
        }
    }

    @Test(
        "parts libcurl would check, split or rewrite go as a string",
        arguments: [
            "/a b", "/a\tb", "/a\u{7F}", "/a#f", "/a?b", "/%2F", "/b%2Fc", "/%C3%A9", "/%Ab", "/%aB", "/a\r\nX: y",
        ])
    func pathsThatGoAsAString(path: String) {
        #expect(!RequestURL.partIsVerbatim(path, query: false))
    }

    @Test(
        "a query may hold a question mark; the rest of the rules are the path's",
        arguments: [("x=1?y=2", true), ("a=%2f", true), ("a=%2F", false), ("a=1#f", false), ("a b", false), ("", true)])
    func queries(query: String, verbatim: Bool) {
        #expect(RequestURL.partIsVerbatim(query, query: true) == verbatim)
    }

    @Test(
        "the usual paths and queries go as parts",
        arguments: ["/", "/small", "/api/v1/accounts/1234567/profile", "/%c3%a9", "/caf\u{e9}", "/a/../b", "/%41%2f"])
    func usualPathsGoAsParts(path: String) {
        #expect(RequestURL.partIsVerbatim(path, query: false))
        #expect(RequestURL.partIsVerbatim("include=details&fields=name", query: true))
    }
}
