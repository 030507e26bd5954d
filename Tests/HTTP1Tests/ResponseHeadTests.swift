import Testing

@testable import HTTP1

/// Response heads are written byte-exact: status line, fields in order, blank line.
@Suite("Response head serialisation")
struct ResponseHeadTests {
    static func bytes(_ head: HTTPResponseHead) -> String {
        var buffer: [UInt8] = []
        head.serialize(into: &buffer)
        return String(decoding: buffer, as: UTF8.self)
    }

    @Test("status line, fields in order and the blank line")
    func serialisesExactly() {
        let head = HTTPResponseHead(
            status: 200,
            headers: [
                (name: "Content-Type", value: "application/json"),
                (name: "Content-Length", value: "2"),
                (name: "Set-Cookie", value: "a=1"),
                (name: "Set-Cookie", value: "b=2"),
            ])
        #expect(
            Self.bytes(head)
                == "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\n\r\n"
        )
    }

    @Test("a head without fields is the status line and the blank line")
    func noFields() {
        #expect(Self.bytes(HTTPResponseHead(status: 204)) == "HTTP/1.1 204 No Content\r\n\r\n")
        #expect(Self.bytes(HTTPResponseHead(status: 100)) == "HTTP/1.1 100 Continue\r\n\r\n")
    }

    @Test("serialise appends to what the buffer already holds")
    func appends() {
        var buffer = Array("prefix".utf8)
        HTTPResponseHead(status: 404, headers: [(name: "X", value: "")]).serialize(into: &buffer)
        #expect(String(decoding: buffer, as: UTF8.self) == "prefixHTTP/1.1 404 Not Found\r\nX: \r\n\r\n")
    }

    static let lines: [(Int, String)] = [
        (200, "OK"), (400, "Bad Request"), (404, "Not Found"), (413, "Content Too Large"), (417, "Expectation Failed"),
        (431, "Request Header Fields Too Large"), (501, "Not Implemented"), (502, "Bad Gateway"),
        (504, "Gateway Timeout"), (505, "HTTP Version Not Supported"), (429, "Too Many Requests"), (299, "Unknown"),
    ]

    @Test("status lines carry the RFC 9110 reason phrase", arguments: lines)
    func statusLine(_ status: Int, _ reason: String) {
        #expect(HTTPResponseHead.reasonPhrase(status) == reason)
        var line: [UInt8] = []
        HTTPResponseHead.appendStatusLine(status, to: &line)
        #expect(line == Array("HTTP/1.1 \(status) \(reason)\r\n".utf8))
    }

    @Test("every parser refusal has a status line of its own")
    func refusalStatusLines() {
        for error in [
            HTTPParseError.bareCR, .headTooLarge, .unsupportedVersion, .connectNotSupported, .unsupportedExpectation,
        ] {
            #expect(HTTPResponseHead.reasonPhrase(error.status) != "Unknown", "\(error)")
        }
    }

    @Test("every line ends in CRLF and the head in a blank line")
    func lineEndings() {
        var buffer: [UInt8] = []
        HTTPResponseHead(
            status: 502, headers: [(name: "Content-Length", value: "0"), (name: "Connection", value: "close")]
        )
        .serialize(into: &buffer)
        let text = String(decoding: buffer, as: UTF8.self)
        #expect(text.hasSuffix("\r\n\r\n"))
        #expect(text.split(separator: "\r\n", omittingEmptySubsequences: false).count == 5)
        // Every LF is preceded by CR.
        #expect(zip(buffer.dropFirst(), buffer).allSatisfy { next, previous in next != 0x0A || previous == 0x0D })
    }
}
