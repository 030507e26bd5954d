import Testing

@testable import Upstream

@Suite("HeaderLines")
struct HeaderLinesTests {
    @Test("lines keep their order and end in one NUL each, the shape curl's header list wants")
    func layout() {
        var lines = HeaderLines(["Accept: */*"])
        lines.append(name: Array("X-A".utf8), value: Array("1".utf8))
        lines.appendPart(Array("Via: ".utf8))
        lines.appendPart(Array("1.1 p".utf8))
        lines.endLine()
        #expect(lines.count == 3)
        #expect(lines.lines == ["Accept: */*", "X-A: 1", "Via: 1.1 p"])
        #expect(lines.bytes.filter { $0 == 0 }.count == 3)
        #expect(lines.bytes.last == 0)
    }

    @Test("names are matched whole and ignoring ASCII case, including curl's `Name;` form")
    func containsName() {
        let lines = HeaderLines(["Accept-Language: en", "content-TYPE: text/plain", "X-Empty;"])
        #expect(!lines.containsName("accept"))
        #expect(lines.containsName("accept-language"))
        #expect(lines.containsName("content-type"))
        #expect(lines.containsName("x-empty"))
        #expect(!HeaderLines().containsName("accept"))
    }

    @Test("as a head written by hand: CRLF after each line, curl's `Name;` as `Name:`, a `;` in a value kept")
    func appendHead() {
        let lines = HeaderLines(["X-Empty;", "Cookie: a=1; b=2", "Accept;x: y", "Sec-WebSocket-Protocol: chat"])
        var head = Array("GET / HTTP/1.1\r\n".utf8)
        lines.appendHead(to: &head)
        HeaderLines().appendHead(to: &head)
        #expect(
            String(decoding: head, as: UTF8.self)
                == "GET / HTTP/1.1\r\nX-Empty:\r\nCookie: a=1; b=2\r\nAccept;x: y\r\nSec-WebSocket-Protocol: chat\r\n")
    }

    @Test("removing drops every line of the named fields and keeps the rest in order")
    func removing() {
        let lines = HeaderLines([
            "Authorization: Bearer a", "Accept: */*", "cookie: c=1", "X-Authorization: Bearer a", "Cookie: d=2",
        ])
        let kept = lines.removing(["authorization", "cookie", "x-authorization"])
        #expect(kept.lines == ["Accept: */*"])
        #expect(kept.count == 1)
    }

    @Test("appending another list keeps both parts in order")
    func concatenation() {
        var both = HeaderLines(["A: 1"])
        both.append(contentsOf: HeaderLines(["B: 2", "C: 3"]))
        #expect(both.lines == ["A: 1", "B: 2", "C: 3"])
        #expect(both.count == 3)
        #expect(HeaderLines().isEmpty)
    }
}

@Suite("UpstreamResponseHead")
struct UpstreamResponseHeadTests {
    @Test("fields are found ignoring case; the first of repeated fields wins")
    func lookup() {
        let head = UpstreamResponseHead(status: 200, headers: [("Content-Type", "a"), ("X-Dup", "1"), ("x-dup", "2")])
        #expect(head.first("content-type") == "a")
        #expect(head.first("X-DUP") == "1")
        #expect(head.first("Missing") == nil)
        #expect(head.headers.map(\.name) == ["Content-Type", "X-Dup", "x-dup"])
    }

    @Test("Content-Length means nothing next to a Transfer-Encoding (RFC 9112 §6.3)")
    func contentLengthWithTransferEncoding() {
        let head = UpstreamResponseHead(
            status: 200, headers: [("Content-Length", "5"), ("Transfer-Encoding", "chunked")])
        #expect(head.contentLength == nil)
    }

    @Test(
        "Content-Length is read only when it is plain digits",
        arguments: [
            ("15", 15), ("0", 0), ("", nil), ("+5", nil), ("5 5", nil), ("-1", nil), ("99999999999999999999", nil),
        ] as [(String, Int?)])
    func contentLength(value: String, expected: Int?) {
        #expect(UpstreamResponseHead(status: 200, headers: [("content-length", value)]).contentLength == expected)
    }

    @Test(
        "Content-Length fields agree only when every field and list element says the same (RFC 9112 §6.3)",
        arguments: [
            (["5"], true), ([], true), (["5", "5"], true), (["5, 5"], true), (["5 ,5", "5"], true),
            (["2", "5"], false), (["5, 6"], false), (["5", "5, 2"], false), (["5", "05"], false),
        ] as [([String], Bool)])
    func contentLengthsAgree(values: [String], agree: Bool) {
        let head = UpstreamResponseHead(status: 200, headers: [("Server", "x")] + values.map { ("Content-Length", $0) })
        #expect(head.contentLengthsAgree == agree)
    }
}

@Suite("UpstreamResponseHead Content-Length numbers")
struct ResponseHeadContentLengthNumberTests {
    @Test(
        "a Content-Length is readable only when each element is plain digits, or a Transfer-Encoding frames the body",
        arguments: [
            (["5"], false, true), (["5, 5"], false, true), (["0"], false, true), (["0x5"], false, false),
            (["+5"], false, false), (["5.0"], false, false), (["5 5"], false, false), ([""], false, false),
            (["-1"], false, false), (["99999999999999999999"], false, false), (["5", "+5"], false, false),
            (["+5"], true, true),
        ] as [([String], Bool, Bool)])
    func readable(values: [String], chunked: Bool, readable: Bool) {
        let fields = values.map { ("Content-Length", $0) } + (chunked ? [("Transfer-Encoding", "chunked")] : [])
        #expect(UpstreamResponseHead(status: 200, headers: fields).contentLengthReadable == readable)
    }
}

@Suite("UpstreamResponseHead field kinds")
struct ResponseHeadKindTests {
    @Test(
        "framing and hop-by-hop names are told apart in any case; names that only look like them are end to end",
        arguments: [
            ("Content-Length", UpstreamResponseHead.Kind.contentLength), ("CONTENT-LENGTH", .contentLength),
            ("transfer-encoding", .transferEncoding), ("Connection", .connection), ("cOnNeCtIoN", .connection),
            ("Keep-Alive", .hopByHop), ("Proxy-Connection", .hopByHop), ("TE", .hopByHop), ("Trailer", .hopByHop),
            ("Upgrade", .hopByHop), ("Content-Lengtx", .endToEnd), ("Connectiox", .endToEnd), ("Keep-Alivf", .endToEnd),
            ("Proxy-Connectiox", .endToEnd), ("Transfer-Encodinx", .endToEnd), ("Tf", .endToEnd),
            ("Trailers", .endToEnd),
            ("Upgradx", .endToEnd), ("Content-Type", .endToEnd), ("X-Request-ID", .endToEnd), ("", .endToEnd),
            ("Content\u{0D}Length", .endToEnd), ("Connection\u{80}", .endToEnd),
        ])
    func kinds(name: String, kind: UpstreamResponseHead.Kind) {
        #expect(UpstreamResponseHead(status: 200, headers: [(name, "v")]).fields.first?.kind == kind)
    }

    @Test(
        "a Connection field names fields unless it says only keep-alive or close",
        arguments: [
            ("keep-alive", false), ("Close", false), (" keep-alive , close,", false), ("", false),
            ("close, X-Hop", true), ("x-other", true), ("keep-alive,,Upgrade", true),
        ])
    func connectionNames(value: String, names: Bool) {
        #expect(UpstreamResponseHead(status: 200, headers: [("Connection", value)]).connectionNamesFields == names)
        #expect(
            UpstreamResponseHead(status: 200, headers: [("Connection", "keep-alive"), ("connection", value)])
                .connectionNamesFields == names)
    }

    @Test("the names Connection fields list are lowercased, without keep-alive, close and empty elements")
    func connectionNameList() {
        let head = UpstreamResponseHead(
            status: 200,
            headers: [
                ("Connection", "keep-alive, X-Hop , x-other"),
                ("connection", "close,,Keep-Alive"), ("Connection", "Upgrade"),
            ])
        #expect(head.connectionNames.map { String(decoding: $0, as: UTF8.self) } == ["x-hop", "x-other", "upgrade"])
        #expect(UpstreamResponseHead(status: 200, headers: [("Connection", "keep-alive")]).connectionNames.isEmpty)
    }

    @Test("each field is stored as its line through the CRLF, whatever line ending the upstream used")
    func storedLines() {
        var head = UpstreamResponseHead(status: 0)
        for line in ["HTTP/1.1 200 OK\r\n", "A: 1\r\n", "B:2\n", "C:  3 \t\r\n", "D: 4", "\r\n"] {
            _ = Array(line.utf8).withUnsafeBytes { head.read(line: $0) }
        }
        let lines = head.fields.map { String(decoding: head.storage[$0.line], as: UTF8.self) }
        #expect(lines == ["A: 1\r\n", "B:2\r\n", "C:  3\r\n", "D: 4\r\n"])
        #expect(head.fields.map(\.isCanonical) == [true, false, false, true])
    }
}

@Suite("EasyHandle header list")
struct EasyHandleHeaderListTests {
    /// The strings of the list curl was given, in order.
    private func listed(_ handle: EasyHandle) -> [String] {
        var result: [String] = []
        var node = handle.headerList
        while let current = node {
            result.append(String(cString: current.pointee.data))
            node = current.pointee.next
        }
        return result
    }

    @Test("lines, injected lines and the blank suppressors reach curl in order, each its own node")
    func order() {
        let handle = EasyHandle(client: nil)
        handle.setHeaders(
            HeaderLines(["X-A: 1", "X-Empty;"]), HeaderLines(["Authorization: Bearer t"]),
            blankAccept: true, blankContentType: false, blankExpect: true)
        #expect(listed(handle) == ["X-A: 1", "X-Empty;", "Authorization: Bearer t", "Expect:", "accept:"])
    }

    @Test("header list holds every line in order when it outgrows its node storage")
    func headerListGrows() {
        let handle = EasyHandle(client: nil)
        let many = (0..<40).map { "X-Field-\($0): value \($0)" }
        handle.setHeaders(
            HeaderLines(many), HeaderLines(["Authorization: Bearer t"]),
            blankAccept: true, blankContentType: false, blankExpect: true)
        #expect(listed(handle) == many + ["Authorization: Bearer t", "Expect:", "accept:"])
        handle.setHeaders(
            HeaderLines(["A: 1"]), HeaderLines(), blankAccept: false, blankContentType: true, blankExpect: false)
        #expect(listed(handle) == ["A: 1", "content-type:"])
    }

    @Test("no lines hands curl no list")
    func emptyList() {
        let handle = EasyHandle(client: nil)
        handle.setHeaders(HeaderLines(), HeaderLines(), blankAccept: false, blankContentType: false, blankExpect: false)
        #expect(handle.headerList == nil)
    }

    @Test("the list grows past its first capacity and is rebuilt, not appended to, per request")
    func growthAndReuse() {
        let handle = EasyHandle(client: nil)
        let many = (0..<300).map { "X-Field-\($0): " + String(repeating: "v", count: $0 % 50) }
        handle.setHeaders(
            HeaderLines(many), HeaderLines(), blankAccept: false, blankContentType: false, blankExpect: false)
        #expect(listed(handle) == many)
        handle.setHeaders(
            HeaderLines(["Only: one"]), HeaderLines(), blankAccept: false, blankContentType: true, blankExpect: false)
        #expect(listed(handle) == ["Only: one", "content-type:"])
    }

    @Test("a NUL inside a line gets its own node rather than a write past the list")
    func nulInsideALine() {
        let handle = EasyHandle(client: nil)
        // 20 lines, one with a NUL: 21 line ends, more than the first capacity of 16 nodes + 1.
        var lines = HeaderLines((0..<19).map { "X-\($0): v" })
        lines.append(name: Array("Authorization".utf8), value: Array("Bearer a\u{0}b".utf8))
        handle.setHeaders(lines, HeaderLines(), blankAccept: false, blankContentType: false, blankExpect: false)
        let listed = listed(handle)
        #expect(listed.count == 21)
        #expect(listed.suffix(2) == ["Authorization: Bearer a", "b"])
    }

    @Test("no lines at all gives curl no list")
    func empty() {
        let handle = EasyHandle(client: nil)
        handle.setHeaders(HeaderLines(), HeaderLines(), blankAccept: false, blankContentType: false, blankExpect: false)
        #expect(handle.headerList == nil)
    }
}

@Suite("HeaderLines names")
struct HeaderLinesNamesTests {
    @Test("two names are looked up in one pass, each on its own")
    func containsNames() {
        let lines = HeaderLines(["Accept: */*", "X-Other: 1"])
        #expect(lines.containsNames("accept", "content-type") == (true, false))
        #expect(HeaderLines(["content-type;"]).containsNames("accept", "content-type") == (false, true))
        #expect(HeaderLines().containsNames("accept", "content-type") == (false, false))
    }

    @Test("a trailing part with no NUL yet is no line to the name lookup, as to curl's list and to count")
    func unfinishedLineIsNotALine() {
        var lines = HeaderLines(["X-Other: 1"])
        lines.appendPart(Array("Accept: */*".utf8))
        // setHeaders hands curl only NUL-terminated lines: were this one counted, curl's own
        // Accept would not be blanked although no Accept line reaches it.
        #expect(lines.count == 1)
        #expect(lines.lines == ["X-Other: 1"])
        #expect(lines.containsNames("accept", "content-type") == (false, false))
        #expect(!lines.containsName("accept"))
        var only = HeaderLines()
        only.appendPart(Array("content-type".utf8))
        #expect(only.containsNames("accept", "content-type") == (false, false))
        only.endLine()
        #expect(only.containsNames("accept", "content-type") == (false, true))
    }
}
