import Testing

@testable import HTTP1

/// Well-formed heads, and heads refused for their request line, version, target or size.
/// Every row is fed whole and one byte at a time (picohttpparser `test.c` style).
@Suite("Request head parser")
struct HeadParserTests {
    static let host = "Host: example.com\r\n"

    static let manyHeaders = (0..<50).map { "X-Header-\($0): value \($0)\r\n" }.joined()

    static let valid: [HeadCase] = [
        HeadCase("simple GET", "GET / HTTP/1.1\r\n\(host)\r\n", ok()),
        HeadCase("HTTP/1.1 defaults to keep-alive", "GET /a HTTP/1.1\r\n\(host)\r\n", ok("GET", "/a")),
        HeadCase("HTTP/1.2 is read as HTTP/1.1 (RFC 9110 §6.2)", "GET /a HTTP/1.2\r\n\(host)\r\n", ok("GET", "/a")),
        HeadCase("HTTP/1.9 is read as HTTP/1.1", "GET /a HTTP/1.9\r\n\(host)\r\n", ok("GET", "/a")),
        HeadCase(
            "HTTP/1.0 defaults to close, Host optional", "GET / HTTP/1.0\r\n\r\n",
            ok("GET", "/", .http10, keepAlive: false)),
        HeadCase(
            "Connection: close on 1.1", "GET / HTTP/1.1\r\n\(host)Connection: close\r\n\r\n", ok(keepAlive: false)),
        HeadCase(
            "Connection: close is case-insensitive and found in a list",
            "GET / HTTP/1.1\r\n\(host)Connection: Upgrade , CLOSE\r\n\r\n", ok(keepAlive: false)),
        HeadCase(
            "Connection: keep-alive on 1.1 changes nothing", "GET / HTTP/1.1\r\n\(host)Connection: keep-alive\r\n\r\n",
            ok()),
        HeadCase("HTTP/1.0 keep-alive", "GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", ok("GET", "/", .http10)),
        HeadCase(
            "HTTP/1.0 close wins over a later keep-alive in the same list",
            "GET / HTTP/1.0\r\nConnection: close, keep-alive\r\n\r\n", ok("GET", "/", .http10, keepAlive: false)),
        HeadCase(
            "HTTP/1.0 close wins over a later keep-alive header",
            "GET / HTTP/1.0\r\nConnection: close\r\nConnection: keep-alive\r\n\r\n",
            ok("GET", "/", .http10, keepAlive: false)),
        HeadCase(
            "leading CRLFs before the request line are ignored and consumed",
            "\r\n\r\nGET / HTTP/1.1\r\n\(host)\r\n", ok()),
        HeadCase(
            "absolute-form target", "GET http://example.com/p?q=1 HTTP/1.1\r\n\(host)\r\n",
            ok("GET", "http://example.com/p?q=1")),
        HeadCase(
            "absolute-form https, scheme case-insensitive", "GET HTTPS://example.com/ HTTP/1.1\r\n\(host)\r\n",
            ok("GET", "HTTPS://example.com/")),
        HeadCase("OPTIONS *", "OPTIONS * HTTP/1.1\r\n\(host)\r\n", ok("OPTIONS", "*")),
        HeadCase(
            "target with query and percent-encoding", "GET /a%20b/c?x=1&y=%2F;z HTTP/1.1\r\n\(host)\r\n",
            ok("GET", "/a%20b/c?x=1&y=%2F;z")),
        HeadCase("many headers", "GET / HTTP/1.1\r\n\(host)\(manyHeaders)\r\n", ok()),
        HeadCase(
            "exactly maxHeaderCount headers", "GET / HTTP/1.1\r\n\(host)A: 1\r\nB: 2\r\n\r\n", ok(),
            limits: HTTPHeadLimits(maxHeadBytes: 1024, maxHeaderCount: 3)),
        HeadCase(
            "head of exactly maxHeadBytes", "GET / HTTP/1.1\r\n\(host)\r\n", ok(),
            limits: HTTPHeadLimits(maxHeadBytes: 37, maxHeaderCount: 100)),
        HeadCase(
            "header value surrounded by spaces and tabs", "POST / HTTP/1.1\r\n\(host)Content-Length: \t 5 \t\r\n\r\n",
            ok("POST", framing: .length(5))),
        HeadCase("header name made of every tchar", "GET / HTTP/1.1\r\n\(host)!#$%&'*+-.^_`|~09azAZ: x\r\n\r\n", ok()),
        HeadCase("empty header value", "GET / HTTP/1.1\r\n\(host)X-Empty:\r\nX-Blank: \t \r\n\r\n", ok()),
        HeadCase(
            "obs-text in a header value",
            bytes: Array("GET / HTTP/1.1\r\n\(host)X-Text: caf".utf8) + [0xE9, 0x80, 0xFF]
                + Array("\r\n\r\n".utf8), ok()),
        HeadCase(
            "Expect: 100-continue with Content-Length",
            "PUT /u HTTP/1.1\r\n\(host)Expect: 100-continue\r\nContent-Length: 3\r\n\r\n",
            ok("PUT", "/u", framing: .length(3), expectsContinue: true)),
        HeadCase(
            "Expect: 100-continue with chunked, case-insensitive",
            "POST / HTTP/1.1\r\n\(host)Transfer-Encoding: chunked\r\nExpect: 100-Continue\r\n\r\n",
            ok("POST", framing: .chunked, expectsContinue: true)),
        HeadCase(
            "Expect: 100-continue without a body does not count",
            "GET / HTTP/1.1\r\n\(host)Expect: 100-continue\r\n\r\n", ok()),
        HeadCase(
            "Expect: 100-continue with Content-Length 0 does not count",
            "POST / HTTP/1.1\r\n\(host)Content-Length: 0\r\nExpect: 100-continue\r\n\r\n", ok("POST")),
        HeadCase(
            "Expect: 100-continue is ignored on HTTP/1.0",
            "POST / HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n",
            ok("POST", "/", .http10, framing: .length(3), keepAlive: false)),
        HeadCase(
            "chunked", "POST / HTTP/1.1\r\n\(host)Transfer-Encoding: chunked\r\n\r\n", ok("POST", framing: .chunked)),
        HeadCase(
            "chunked, case-insensitive", "POST / HTTP/1.1\r\n\(host)transfer-encoding:  Chunked \r\n\r\n",
            ok("POST", framing: .chunked)),
        HeadCase(
            "Content-Length with leading zeros", "POST / HTTP/1.1\r\n\(host)Content-Length: 0005\r\n\r\n",
            ok("POST", framing: .length(5))),
        HeadCase("Content-Length 000 is no body", "POST / HTTP/1.1\r\n\(host)Content-Length: 000\r\n\r\n", ok("POST")),
        HeadCase(
            "Content-Length of 18 digits", "POST / HTTP/1.1\r\n\(host)Content-Length: 999999999999999999\r\n\r\n",
            ok("POST", framing: .length(999_999_999_999_999_999))),
        HeadCase(
            "POST without Content-Length or Transfer-Encoding has no body", "POST / HTTP/1.1\r\n\(host)\r\n", ok("POST")
        ),
        HeadCase("lowercase method is a valid token", "get / HTTP/1.1\r\n\(host)\r\n", ok("get")),
        HeadCase("extension method", "PURGE /x HTTP/1.1\r\n\(host)\r\n", ok("PURGE", "/x")),
        HeadCase("Host as IPv6 literal with port", "GET / HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n", ok()),
        HeadCase("Host as IPv4 with port", "GET / HTTP/1.1\r\nHost: 127.0.0.1:443\r\n\r\n", ok()),
    ]

    static let invalid: [HeadCase] = [
        HeadCase(
            "multiple spaces between method and target", "GET  / HTTP/1.1\r\n\(host)\r\n", fails(.invalidRequestLine)),
        HeadCase(
            "multiple spaces between target and version", "GET /  HTTP/1.1\r\n\(host)\r\n", fails(.invalidVersion)),
        HeadCase("tab after the method", "GET\t/ HTTP/1.1\r\n\(host)\r\n", fails(.invalidMethod)),
        HeadCase("tab after the target", "GET /\tHTTP/1.1\r\n\(host)\r\n", fails(.invalidTarget)),
        HeadCase("trailing space after the version", "GET / HTTP/1.1 \r\n\(host)\r\n", fails(.invalidVersion)),
        HeadCase("leading space before the method", " GET / HTTP/1.1\r\n\(host)\r\n", fails(.invalidMethod)),
        HeadCase("HTTP/0.9 style request line", "GET /\r\n\r\n", fails(.invalidRequestLine)),
        HeadCase("method alone", "GET\r\n\r\n", fails(.invalidRequestLine)),
        HeadCase("non-token byte in the method", "GE(T / HTTP/1.1\r\n\(host)\r\n", fails(.invalidMethod)),
        HeadCase("version HTTP/1", "GET / HTTP/1\r\n\(host)\r\n", fails(.invalidVersion)),
        HeadCase("version HTTP/01.01", "GET / HTTP/01.01\r\n\(host)\r\n", fails(.invalidVersion)),
        HeadCase("version HTTP/ 1.1", "GET / HTTP/ 1.1\r\n\(host)\r\n", fails(.invalidVersion)),
        HeadCase("version in lowercase", "GET / http/1.1\r\n\(host)\r\n", fails(.invalidVersion)),
        HeadCase("version with a suffix", "GET / HTTP/1.1x\r\n\(host)\r\n", fails(.invalidVersion)),
        HeadCase("version HTTP/9.9", "GET / HTTP/9.9\r\n\(host)\r\n", fails(.unsupportedVersion)),
        HeadCase("version HTTP/2.0", "GET / HTTP/2.0\r\n\(host)\r\n", fails(.unsupportedVersion)),
        HeadCase("version HTTP/0.9 spelled out", "GET / HTTP/0.9\r\n\(host)\r\n", fails(.unsupportedVersion)),
        HeadCase("HTTP/2 connection preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", fails(.unsupportedVersion)),
        HeadCase(
            "non-ASCII byte in the target",
            bytes: Array("GET /caf".utf8) + [0xC3, 0xA9] + Array(" HTTP/1.1\r\n\(host)\r\n".utf8),
            fails(.invalidTarget)),
        HeadCase("NUL in the target", "GET /a\u{0}b HTTP/1.1\r\n\(host)\r\n", fails(.invalidTarget)),
        HeadCase("DEL in the target", "GET /a\u{7F} HTTP/1.1\r\n\(host)\r\n", fails(.invalidTarget)),
        HeadCase("fragment in the target", "GET /a#frag HTTP/1.1\r\n\(host)\r\n", fails(.invalidTarget)),
        HeadCase("asterisk-form with GET", "GET * HTTP/1.1\r\n\(host)\r\n", fails(.invalidTarget)),
        HeadCase("authority-form with GET", "GET example.com:443 HTTP/1.1\r\n\(host)\r\n", fails(.invalidTarget)),
        HeadCase(
            "absolute-form with another scheme", "GET ftp://example.com/ HTTP/1.1\r\n\(host)\r\n", fails(.invalidTarget)
        ),
        HeadCase(
            "absolute-form scheme without authority", "GET http:// HTTP/1.1\r\n\(host)\r\n", fails(.invalidTarget)),
        HeadCase("CONNECT tunnel", "CONNECT example.com:443 HTTP/1.1\r\n\(host)\r\n", fails(.connectNotSupported)),
        HeadCase(
            "Expect other than 100-continue", "GET / HTTP/1.1\r\n\(host)Expect: 200-ok\r\n\r\n",
            fails(.unsupportedExpectation)),
        HeadCase(
            "Expect other than 100-continue on HTTP/1.0", "GET / HTTP/1.0\r\nExpect: 200-ok\r\n\r\n",
            fails(.unsupportedExpectation)),
        HeadCase(
            "head over maxHeadBytes, complete", "GET / HTTP/1.1\r\n\(host)\r\n", fails(.headTooLarge),
            limits: HTTPHeadLimits(maxHeadBytes: 36, maxHeaderCount: 100)),
        HeadCase(
            "head over maxHeadBytes, still incomplete", "GET /" + String(repeating: "a", count: 100),
            fails(.headTooLarge),
            limits: HTTPHeadLimits(maxHeadBytes: 64, maxHeaderCount: 100)),
        HeadCase(
            "endless CRLFs before the request line", String(repeating: "\r\n", count: 100), fails(.headTooLarge),
            limits: HTTPHeadLimits(maxHeadBytes: 64, maxHeaderCount: 100)),
        HeadCase(
            "too many headers", "GET / HTTP/1.1\r\n\(host)A: 1\r\nB: 2\r\nC: 3\r\n\r\n", fails(.tooManyHeaders),
            limits: HTTPHeadLimits(maxHeadBytes: 1024, maxHeaderCount: 3)),
    ]

    @Test("well-formed head is parsed, whole and byte at a time", arguments: valid)
    func parsesValidHead(_ c: HeadCase) {
        checkHeadCase(c)
    }

    @Test("malformed request line, target, version or size is refused", arguments: invalid)
    func refusesInvalidHead(_ c: HeadCase) {
        checkHeadCase(c)
    }

    @Test(
        "the Host value is found while the head is checked: the same bytes as a search for it, nil without one",
        arguments: [
            ("GET / HTTP/1.1\r\nHost: example.com\r\n\r\n", "example.com"),
            ("GET / HTTP/1.1\r\nhOsT:\t  [::1]:8080 \t\r\nAccept: */*\r\n\r\n", "[::1]:8080"),
            ("GET / HTTP/1.1\r\nX-Host: a\r\nHosts: b\r\nHOST: c.example\r\n\r\n", "c.example"),
            ("GET / HTTP/1.0\r\nAccept: */*\r\n\r\n", nil),
        ] as [(String, String?)])
    func hostValue(text: String, host: String?) throws {
        var parser = HTTPRequestHeadParser()
        let bytes = Array(text.utf8)
        guard case .complete(let head, _) = bytes.withUnsafeBytes({ parser.parse($0) }) else {
            Issue.record("did not parse: \(text)")
            return
        }
        #expect(head.hostValue.map { head.withBytes(of: $0) { String(decoding: $0, as: UTF8.self) } } == host)
        #expect(head.first("Host") == host)
    }

    @Test(
        "the first Upgrade value is noted while the head is checked, nil without one",
        arguments: [
            ("GET / HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", "websocket"),
            ("GET / HTTP/1.1\r\nHost: a\r\nUPGRADE:  h2c, websocket \r\nUpgrade: other\r\n\r\n", "h2c, websocket"),
            ("GET / HTTP/1.1\r\nHost: a\r\nUpgrades: x\r\nX-Upgrade: y\r\n\r\n", nil),
            ("GET / HTTP/1.1\r\nHost: a\r\n\r\n", nil),
        ] as [(String, String?)])
    func upgradeValue(text: String, upgrade: String?) throws {
        var parser = HTTPRequestHeadParser()
        let bytes = Array(text.utf8)
        guard case .complete(let head, _) = bytes.withUnsafeBytes({ parser.parse($0) }) else {
            Issue.record("did not parse: \(text)")
            return
        }
        #expect(head.upgradeValue.map { head.string($0) } == upgrade)
        #expect(head.first("Upgrade") == upgrade)
    }

    @Test(
        "the method reads as sent, the usual ones and any other, case kept",
        arguments: [
            "GET", "PUT", "POST", "HEAD", "PATCH", "DELETE", "OPTIONS", "get", "Post", "PROPFIND", "GETS", "PUTS", "M",
            "HEADER",
        ])
    func methodAsSent(method: String) {
        var parser = HTTPRequestHeadParser()
        let bytes = Array("\(method) /x HTTP/1.1\r\nHost: a\r\n\r\n".utf8)
        guard case .complete(let head, _) = bytes.withUnsafeBytes({ parser.parse($0) }) else {
            Issue.record("did not parse: \(method)")
            return
        }
        #expect(head.method == method)
    }

    @Test("an empty buffer and a partial head are incomplete")
    func incompleteHead() {
        #expect(parseWhole([]) == .incomplete)
        #expect(parseWhole(Array("GET / HTTP/1.1\r\nHost: a\r\n".utf8)) == .incomplete)
        #expect(parseWhole(Array("GET / HTTP/1.1\r\nHost: a\r\n\r".utf8)) == .incomplete)
        #expect(parseWhole(Array("\r\n\r".utf8)) == .incomplete)
    }

    @Test("fields keep their order and trimmed values, looked up case-insensitively")
    func fieldAccessors() throws {
        let raw = "POST /p?q HTTP/1.1\r\nHost:example.com\r\nX-A:  a  b \t\r\nx-a: second\r\nX-Empty:\r\n\r\n"
        let head = try #require(parseHead(raw))
        #expect(head.fieldCount == 4)
        #expect(head.name(at: 0) == "Host" && head.value(at: 0) == "example.com")
        #expect(head.name(at: 1) == "X-A" && head.value(at: 1) == "a  b")
        #expect(head.value(at: 3) == "")
        #expect(head.first("x-A") == "a  b")
        #expect(head.firstIndex(of: "X-A") == 1)
        #expect(head.first("HOST") == "example.com")
        #expect(head.first("Missing") == nil)
        #expect(head.methodIs("POST") && !head.methodIs("post") && !head.methodIs("POS"))
        #expect(head.targetIs("/p?q") && !head.targetIs("/p"))
        #expect(head.storage == Array(raw.utf8))
    }

    @Test(
        "idempotent methods are read from the bytes, case-sensitively (RFC 9110 §9.2.2)",
        arguments: [
            ("GET", true), ("HEAD", true), ("OPTIONS", true), ("PUT", true), ("DELETE", true), ("POST", false),
            ("PATCH", false), ("get", false), ("PURGE", false), ("LOCK", false), ("PROPFIND", false),
        ])
    func idempotentMethods(method: String, idempotent: Bool) throws {
        let head = try #require(parseHead("\(method) /x HTTP/1.1\r\nHost: h\r\n\r\n"))
        #expect(head.methodIsIdempotent == idempotent)
        #expect(HTTPRequestHead.isIdempotent(method) == idempotent)
    }

    @Test("obs-text in a value is kept byte for byte")
    func obsTextBytes() throws {
        let bytes = Array("GET / HTTP/1.1\r\nHost: a\r\nX-Text: \u{80}".utf8) + [0xFF] + Array(" \r\n\r\n".utf8)
        var parser = HTTPRequestHeadParser()
        guard case .complete(let head, _) = bytes.withUnsafeBytes({ parser.parse($0) }) else {
            Issue.record("expected complete"); return
        }
        let range = head.fields[1].value
        #expect(Array(head.storage[range]) == [0xC2, 0x80, 0xFF])
    }

    @Test("leading CRLFs are consumed but not part of the head's storage")
    func leadingEmptyLines() throws {
        let raw = Array("\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n".utf8)
        var parser = HTTPRequestHeadParser()
        guard case .complete(let head, let consumed) = raw.withUnsafeBytes({ parser.parse($0) }) else {
            Issue.record("expected complete"); return
        }
        #expect(consumed == raw.count)
        #expect(head.storage == Array(raw[4...]))
        #expect(head.method == "GET")
    }

    @Test("pipelined requests: consumed stops at the head, reset() parses the next")
    func pipelining() {
        let first = "POST /one HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n"
        let second = "GET /two HTTP/1.1\r\nHost: a\r\n\r\n"
        var buffer = Array((first + "hello" + second).utf8)
        var parser = HTTPRequestHeadParser()
        guard case .complete(let head1, let consumed1) = buffer.withUnsafeBytes({ parser.parse($0) }) else {
            Issue.record("first head"); return
        }
        #expect(head1.target == "/one" && head1.framing == .length(5))
        #expect(consumed1 == first.utf8.count)
        buffer.removeFirst(consumed1 + 5)
        parser.reset()
        guard case .complete(let head2, let consumed2) = buffer.withUnsafeBytes({ parser.parse($0) }) else {
            Issue.record("second head"); return
        }
        #expect(head2.target == "/two" && head2.framing == .none)
        #expect(consumed2 == buffer.count)
    }

    static let propertyRequests = [
        "\r\nPOST /upload?x=1 HTTP/1.1\r\nHost: example.com:8080\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\nX-A: b\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\r\nX: a\rb\r\n\r\n",
    ]

    @Test("feeding any chunk size gives the same result as feeding whole", arguments: propertyRequests)
    func chunkSizeIndependence(_ raw: String) {
        let bytes = Array(raw.utf8)
        let whole = parseWhole(bytes)
        #expect(whole != .incomplete)
        for step in 1...bytes.count {
            let outcomes = parseGrowing(bytes, step: step)
            #expect(outcomes.last == whole, "step \(step)")
            #expect(outcomes.dropLast().allSatisfy { $0 == .incomplete }, "step \(step)")
        }
    }

    @Test("a 30 KB head fed one byte at a time parses correctly")
    func largeHeadByteAtATime() throws {
        let filler = String(repeating: "v", count: 500)
        let fields = (0..<59).map { "X-Filler-\($0): \(filler)\r\n" }.joined()
        let raw = "GET /big HTTP/1.1\r\nHost: example.com\r\n\(fields)\r\n"
        let bytes = Array(raw.utf8)
        #expect(bytes.count > 30_000 && bytes.count < 32_768)

        var parser = HTTPRequestHeadParser()
        var buffer: [UInt8] = []
        buffer.reserveCapacity(bytes.count)
        var result: HeadParseResult = .incomplete
        for (n, b) in bytes.enumerated() {
            buffer.append(b)
            result = buffer.withUnsafeBytes { parser.parse($0) }
            if case .incomplete = result { continue }
            #expect(n == bytes.count - 1, "finished early at byte \(n)")
            break
        }
        guard case .complete(let head, let consumed) = result else {
            Issue.record("expected complete, got \(HeadOutcome(result))"); return
        }
        #expect(consumed == bytes.count)
        #expect(head.fieldCount == 60)
        #expect(head.target == "/big")
        #expect(head.value(at: 59) == filler)
        #expect(head.name(at: 59) == "X-Filler-58")
    }
}
