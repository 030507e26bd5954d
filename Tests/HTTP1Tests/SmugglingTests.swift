import Testing

@testable import HTTP1

/// Every request-smuggling and header-injection defence (docs/architecture.md, "Every smuggling
/// defence is a named error"), one row per attack (swift-nio `testRefusesRequestSmugglingAttempt`
/// style), fed whole and one byte at a time.
@Suite("Request smuggling defences")
struct SmugglingTests {
    static let line = "POST / HTTP/1.1\r\n"
    static let host = "Host: example.com\r\n"
    static let te = "Transfer-Encoding: chunked\r\n"

    static func post(_ fields: String) -> String { "\(line)\(host)\(fields)\r\n" }

    static let framing: [HeadCase] = [
        HeadCase(
            "CL.TE: Content-Length then Transfer-Encoding", post("Content-Length: 5\r\n\(te)"),
            fails(.contentLengthWithTransferEncoding)),
        HeadCase(
            "TE.CL: Transfer-Encoding then Content-Length", post("\(te)Content-Length: 5\r\n"),
            fails(.contentLengthWithTransferEncoding)),
        HeadCase(
            "TE.CL with Content-Length 0", post("\(te)Content-Length: 0\r\n"), fails(.contentLengthWithTransferEncoding)
        ),
        HeadCase(
            "CL with an unknown Transfer-Encoding", post("Content-Length: 5\r\nTransfer-Encoding: identity\r\n"),
            fails(.contentLengthWithTransferEncoding)),
        HeadCase("Transfer-Encoding on HTTP/1.0", "POST / HTTP/1.0\r\n\(te)\r\n", fails(.transferEncodingOnHTTP10)),
        HeadCase(
            "Transfer-Encoding with Content-Length on HTTP/1.0", "POST / HTTP/1.0\r\n\(te)Content-Length: 5\r\n\r\n",
            fails(.transferEncodingOnHTTP10)),
        HeadCase(
            "coding list not ending in chunked", post("Transfer-Encoding: chunked, gzip\r\n"),
            fails(.transferEncodingNotChunked)),
        HeadCase(
            "coding list not ending in chunked, across headers", post("\(te)Transfer-Encoding: gzip\r\n"),
            fails(.transferEncodingNotChunked)),
        HeadCase("chunked twice in one header", post("Transfer-Encoding: chunked, chunked\r\n"), fails(.chunkedTwice)),
        HeadCase("chunked twice in two headers", post("\(te)\(te)"), fails(.chunkedTwice)),
        HeadCase("identity coding", post("Transfer-Encoding: identity\r\n"), fails(.unsupportedTransferCoding)),
        HeadCase("gzip alone", post("Transfer-Encoding: gzip\r\n"), fails(.unsupportedTransferCoding)),
        HeadCase(
            "gzip before chunked (we forward bodies undecoded)", post("Transfer-Encoding: gzip, chunked\r\n"),
            fails(.unsupportedTransferCoding)),
        HeadCase("xchunked look-alike", post("Transfer-Encoding: xchunked\r\n"), fails(.unsupportedTransferCoding)),
        HeadCase(
            "chunked with parameters", post("Transfer-Encoding: chunked;q=1\r\n"), fails(.unsupportedTransferCoding)),
        HeadCase(
            "chunked with spaced parameters", post("Transfer-Encoding: chunked ; foo=bar\r\n"),
            fails(.unsupportedTransferCoding)),
        HeadCase("empty Transfer-Encoding", post("Transfer-Encoding:\r\n"), fails(.transferEncodingNotChunked)),
        HeadCase(
            "Transfer-Encoding with a leading comma", post("Transfer-Encoding: , chunked\r\n"),
            fails(.transferEncodingNotChunked)),
        HeadCase(
            "Transfer-Encoding with a trailing comma", post("Transfer-Encoding: chunked,\r\n"),
            fails(.transferEncodingNotChunked)),
        HeadCase(
            "vertical tab in Transfer-Encoding", post("Transfer-Encoding: \u{0B}chunked\r\n"),
            fails(.invalidHeaderValue)),
        HeadCase(
            "form feed in Transfer-Encoding", post("Transfer-Encoding: chunked\u{0C}\r\n"), fails(.invalidHeaderValue)),
        HeadCase(
            "differing Content-Lengths", post("Content-Length: 5\r\nContent-Length: 6\r\n"),
            fails(.differingContentLengths)),
        HeadCase(
            "same Content-Length twice", post("Content-Length: 5\r\nContent-Length: 5\r\n"),
            fails(.differingContentLengths)),
        HeadCase("Content-Length list 5, 5", post("Content-Length: 5, 5\r\n"), fails(.differingContentLengths)),
        HeadCase("Content-Length list 5, 6", post("Content-Length: 5, 6\r\n"), fails(.differingContentLengths)),
        HeadCase("Content-Length non-digit", post("Content-Length: abc\r\n"), fails(.invalidContentLength)),
        HeadCase("Content-Length +5", post("Content-Length: +5\r\n"), fails(.invalidContentLength)),
        HeadCase("Content-Length -0", post("Content-Length: -0\r\n"), fails(.invalidContentLength)),
        HeadCase("Content-Length -1", post("Content-Length: -1\r\n"), fails(.invalidContentLength)),
        HeadCase("Content-Length 0x5", post("Content-Length: 0x5\r\n"), fails(.invalidContentLength)),
        HeadCase("Content-Length 1_0", post("Content-Length: 1_0\r\n"), fails(.invalidContentLength)),
        HeadCase("Content-Length 1 0", post("Content-Length: 1 0\r\n"), fails(.invalidContentLength)),
        HeadCase("Content-Length 5.0", post("Content-Length: 5.0\r\n"), fails(.invalidContentLength)),
        HeadCase("Content-Length empty", post("Content-Length:\r\n"), fails(.invalidContentLength)),
        HeadCase(
            "Content-Length overflow, 20 digits", post("Content-Length: 99999999999999999999\r\n"),
            fails(.contentLengthOverflow)),
        HeadCase(
            "Content-Length overflow, 19 digits", post("Content-Length: 1000000000000000000\r\n"),
            fails(.contentLengthOverflow)),
        HeadCase(
            "Content-Length wrapping to a small value", post("Content-Length: 18446744073709551621\r\n"),
            fails(.contentLengthOverflow)),
    ]

    static let host11: [HeadCase] = [
        HeadCase("missing Host on HTTP/1.1", "GET / HTTP/1.1\r\n\r\n", fails(.missingHost)),
        HeadCase(
            "missing Host on HTTP/1.1 with absolute-form", "GET http://example.com/ HTTP/1.1\r\n\r\n",
            fails(.missingHost)),
        HeadCase(
            "duplicate Host", "GET / HTTP/1.1\r\nHost: a.example\r\nHost: b.example\r\n\r\n", fails(.duplicateHost)),
        HeadCase(
            "duplicate Host, same value, different case", "GET / HTTP/1.1\r\nHost: a\r\nhost: a\r\n\r\n",
            fails(.duplicateHost)),
        HeadCase("duplicate Host on HTTP/1.0", "GET / HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n", fails(.duplicateHost)),
        HeadCase("Host with userinfo", "GET / HTTP/1.1\r\nHost: user:pass@example.com\r\n\r\n", fails(.invalidHost)),
        HeadCase("Host with a path", "GET / HTTP/1.1\r\nHost: example.com/admin\r\n\r\n", fails(.invalidHost)),
        HeadCase(
            "Host with a comma (two hosts)", "GET / HTTP/1.1\r\nHost: a.example, b.example\r\n\r\n", fails(.invalidHost)
        ),
        HeadCase("empty Host", "GET / HTTP/1.1\r\nHost:\r\n\r\n", fails(.invalidHost)),
        HeadCase("Host with inner whitespace", "GET / HTTP/1.1\r\nHost: a b\r\n\r\n", fails(.invalidHost)),
        HeadCase("Host with a non-numeric port", "GET / HTTP/1.1\r\nHost: a:http\r\n\r\n", fails(.invalidHost)),
        HeadCase("Host with a six-digit port", "GET / HTTP/1.1\r\nHost: a:123456\r\n\r\n", fails(.invalidHost)),
        HeadCase("Host with only a port", "GET / HTTP/1.1\r\nHost: :80\r\n\r\n", fails(.invalidHost)),
        HeadCase("Host with an unclosed IPv6 literal", "GET / HTTP/1.1\r\nHost: [::1\r\n\r\n", fails(.invalidHost)),
        HeadCase("Host with a bracket inside a reg-name", "GET / HTTP/1.1\r\nHost: a]b\r\n\r\n", fails(.invalidHost)),
    ]

    static let lines: [HeadCase] = [
        HeadCase("whitespace before the colon", "GET / HTTP/1.1\r\nHost : a\r\n\r\n", fails(.whitespaceBeforeColon)),
        HeadCase(
            "whitespace before the colon of Transfer-Encoding",
            post("Content-Length: 5\r\nTransfer-Encoding : chunked\r\n"), fails(.whitespaceBeforeColon)),
        HeadCase("tab before the colon", "GET / HTTP/1.1\r\nHost\t: a\r\n\r\n", fails(.whitespaceBeforeColon)),
        HeadCase("bare CR in the request line", "GET / HTTP/1.1\rHost: a\r\n\r\n", fails(.bareCR)),
        HeadCase("bare CR inside the request target", "GET /a\rb HTTP/1.1\r\nHost: a\r\n\r\n", fails(.bareCR)),
        HeadCase(
            "bare CR in a header value", "GET / HTTP/1.1\r\nHost: a\r\nX: a\rTransfer-Encoding: chunked\r\n\r\n",
            fails(.bareCR)),
        HeadCase("CR CR LF line ending", "GET / HTTP/1.1\r\r\nHost: a\r\n\r\n", fails(.bareCR)),
        HeadCase("bare LF ending the request line", "GET / HTTP/1.1\nHost: a\r\n\r\n", fails(.bareLF)),
        HeadCase("bare LF ending a header", "GET / HTTP/1.1\r\nHost: a\nX: b\r\n\r\n", fails(.bareLF)),
        HeadCase("bare LF ending the head", "GET / HTTP/1.1\r\nHost: a\r\n\n", fails(.bareLF)),
        HeadCase("bare LF before the request line", "\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", fails(.bareLF)),
        HeadCase("bare LF after an ignored CRLF", "\r\n\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", fails(.bareLF)),
        HeadCase(
            "obs-fold continuation with a space", "GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n b\r\n\r\n", fails(.obsFold)),
        HeadCase("obs-fold hiding Transfer-Encoding", post("Transfer-Encoding:\r\n chunked\r\n"), fails(.obsFold)),
        HeadCase(
            "obs-fold continuation with a tab", "GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n\tb\r\n\r\n", fails(.obsFold)),
        HeadCase("whitespace before the first header", "GET / HTTP/1.1\r\n Host: a\r\n\r\n", fails(.obsFold)),
        HeadCase("empty header name", "GET / HTTP/1.1\r\nHost: a\r\n: value\r\n\r\n", fails(.invalidHeaderName)),
        HeadCase("header without a colon", "GET / HTTP/1.1\r\nHost: a\r\nNoColon\r\n\r\n", fails(.invalidHeaderName)),
        HeadCase(
            "non-token byte in a header name", "GET / HTTP/1.1\r\nHost: a\r\nX(y): z\r\n\r\n", fails(.invalidHeaderName)
        ),
        HeadCase(
            "non-ASCII header name",
            bytes: Array("GET / HTTP/1.1\r\nHost: a\r\nX".utf8) + [0xC3, 0xA9] + Array(": z\r\n\r\n".utf8),
            fails(.invalidHeaderName)),
        HeadCase(
            "NUL in a header value", "GET / HTTP/1.1\r\nHost: a\r\nX: a\u{0}b\r\n\r\n", fails(.invalidHeaderValue)),
        HeadCase(
            "control character in a header value", "GET / HTTP/1.1\r\nHost: a\r\nX: a\u{1}b\r\n\r\n",
            fails(.invalidHeaderValue)),
        HeadCase(
            "escape character in a header value", "GET / HTTP/1.1\r\nHost: a\r\nX: \u{1B}[31m\r\n\r\n",
            fails(.invalidHeaderValue)),
        HeadCase(
            "DEL in a header value", "GET / HTTP/1.1\r\nHost: a\r\nX: a\u{7F}\r\n\r\n", fails(.invalidHeaderValue)),
    ]

    @Test("ambiguous body framing is refused", arguments: framing)
    func refusesRequestSmugglingAttempt(_ c: HeadCase) {
        checkHeadCase(c)
    }

    @Test("Host routing confusion is refused", arguments: host11)
    func refusesHostConfusion(_ c: HeadCase) {
        checkHeadCase(c)
    }

    @Test("line and field syntax that parsers disagree on is refused", arguments: lines)
    func refusesAmbiguousLines(_ c: HeadCase) {
        checkHeadCase(c)
    }

    @Test("a smuggled second request after a refused head is never parsed")
    func smuggledSuffixNotParsed() {
        // CL.TE: a front end honouring Content-Length would forward "0\r\n\r\nGET /admin ..." as body.
        let raw =
            Self.post("Content-Length: 44\r\n\(Self.te)") + "0\r\n\r\nGET /admin HTTP/1.1\r\nHost: example.com\r\n\r\n"
        #expect(parseWhole(Array(raw.utf8)) == .invalid(.contentLengthWithTransferEncoding))
    }

    struct Answer: Sendable, CustomTestStringConvertible {
        let error: HTTPParseError
        let status: Int
        let code: String
        init(_ error: HTTPParseError, _ status: Int, _ code: String) {
            (self.error, self.status, self.code) = (error, status, code)
        }
        var testDescription: String { "\(error) -> \(status) \(code)" }
    }

    static let statuses: [Answer] = [
        Answer(.contentLengthWithTransferEncoding, 400, "bad_request"),
        Answer(.bareLF, 400, "bad_request"),
        Answer(.obsFold, 400, "bad_request"),
        Answer(.missingHost, 400, "bad_request"),
        Answer(.invalidChunkSize, 400, "bad_request"),
        Answer(.headTooLarge, 431, "header_too_large"),
        Answer(.tooManyHeaders, 431, "header_too_large"),
        Answer(.unsupportedVersion, 505, "http_version_not_supported"),
        Answer(.connectNotSupported, 501, "method_not_supported"),
        Answer(.unsupportedExpectation, 417, "expectation_failed"),
    ]

    @Test("each refusal carries its HTTP status and snake_case code", arguments: statuses)
    func errorStatus(_ answer: Answer) {
        #expect(answer.error.status == answer.status)
        #expect(answer.error.errorCode == answer.code)
        #expect(!answer.error.message.isEmpty)
        #expect(answer.error.description == "HTTPParseError.\(answer.error.reason)")
    }

    @Test("errors are distinct values")
    func errorsAreDistinct() {
        let all: [HTTPParseError] = [
            .invalidRequestLine, .invalidMethod, .invalidTarget, .invalidVersion, .unsupportedVersion, .bareCR, .bareLF,
            .obsFold, .whitespaceBeforeColon, .invalidHeaderName, .invalidHeaderValue, .headTooLarge, .tooManyHeaders,
            .missingHost, .duplicateHost, .invalidHost, .contentLengthWithTransferEncoding, .transferEncodingOnHTTP10,
            .transferEncodingNotChunked, .chunkedTwice, .unsupportedTransferCoding, .invalidContentLength,
            .differingContentLengths, .contentLengthOverflow, .invalidChunkSize, .chunkSizeOverflow,
            .invalidChunkExtension,
            .chunkExtensionTooLong, .missingChunkTerminator, .invalidTrailer, .trailerTooLarge, .connectNotSupported,
            .unsupportedExpectation,
        ]
        #expect(Set(all).count == all.count)
        #expect(Set(all.map(\.reason)).count == all.count)
    }
}
