import HTTP1
import Testing

@testable import Upstream

/// Feeds header lines as libcurl hands them over and returns the final heads in the order the
/// transfer would deliver them (a blank line after a status of 200 or more, once).
private func heads(_ lines: [String]) -> [UpstreamResponseHead] {
    var head = UpstreamResponseHead(status: 0)
    var delivered: [UpstreamResponseHead] = []
    for line in lines {
        let kind = Array(line.utf8).withUnsafeBytes { head.read(line: $0) }
        if kind == .end, head.status >= 200, delivered.isEmpty { delivered.append(head) }
    }
    return delivered
}

private func read(_ line: String, into head: inout UpstreamResponseHead) -> UpstreamResponseHead.Line {
    Array(line.utf8).withUnsafeBytes { head.read(line: $0) }
}

/// A head that has read a 200 status line and then `lines`.
private func headAfterStatus(_ lines: String...) -> UpstreamResponseHead {
    var head = UpstreamResponseHead(status: 0)
    for line in ["HTTP/1.1 200 OK\r\n"] + lines { _ = read(line, into: &head) }
    return head
}

@Suite("UpstreamResponseHead.read(line:)")
struct ResponseHeadLinesTests {
    @Test("a status line and fields make the head; the blank line ends it")
    func simpleHead() {
        let got = heads(["HTTP/1.1 201 Created\r\n", "Content-Type: text/plain\r\n", "X-A: 1\r\n", "\r\n"])
        #expect(got.count == 1)
        #expect(got.first?.status == 201)
        #expect(got.first?.headers.map(\.name) == ["Content-Type", "X-A"])
        #expect(got.first?.first("content-type") == "text/plain")
    }

    @Test("1xx heads are skipped: their fields do not leak into the final head")
    func informationalSkipped() {
        let got = heads([
            "HTTP/1.1 100 Continue\r\n", "\r\n", "HTTP/1.1 103 Early Hints\r\n", "Link: </a>; rel=preload\r\n", "\r\n",
            "HTTP/1.1 200 OK\r\n", "Content-Length: 3\r\n", "\r\n",
        ])
        #expect(got.count == 1)
        #expect(got.first?.status == 200)
        #expect(got.first?.headers.map(\.name) == ["Content-Length"])
        #expect(got.first?.contentLength == 3)
    }

    @Test("curl's HTTP/2 status line names the status too")
    func http2StatusLine() {
        var head = UpstreamResponseHead(status: 0)
        #expect(read("HTTP/2 204 \r\n", into: &head) == .statusLine)
        #expect(head.status == 204)
    }

    @Test(
        "a status that is not three digits from 100 to 599 gives no head (a 502; RFC 9110 §15)",
        arguments: [
            "HTTP/1.1 99999999999999 Big\r\n", "HTTP/1.1 20 Short\r\n", "HTTP/1.1 099 Low\r\n", "HTTP/1.1 abc Word\r\n",
            "HTTP/1.1 2000 Long\r\n", "HTTP/1.1 600 Six\r\n", "HTTP/1.1 999 Unknown\r\n", "HTTP/2 700\r\n",
        ])
    func badStatus(line: String) {
        #expect(heads([line, "X: y\r\n", "\r\n"]).isEmpty)
    }

    @Test("the line ending may be CRLF, LF or repeated; value whitespace is trimmed")
    func lineEndings() {
        var head = UpstreamResponseHead(status: 0)
        _ = read("HTTP/1.1 200 OK\n", into: &head)
        #expect(read("A:  spaced \t\r\n", into: &head) == .field)
        #expect(read("B:\tx\n", into: &head) == .field)
        #expect(read("C: y\r\n\r\n", into: &head) == .field)
        #expect(read("D:\r\n", into: &head) == .field)
        #expect(read("\n", into: &head) == .end)
        #expect(head.headers.map(\.value) == ["spaced", "x", "y", ""])
    }

    @Test(
        "a continuation line (obsolete folding) is told apart, so the transfer refuses the head (RFC 9112 §5.2)",
        arguments: [" folded continuation\r\n", "\tfolded: too\r\n", " HttpOnly; Secure\r\n"])
    func foldedLines(line: String) {
        var head = headAfterStatus("Connection: keep-alive,\r\n")
        #expect(read(line, into: &head) == .folded)
        #expect(head.fields.count == 1)
    }

    @Test(
        "nameless and non-token lines are dropped, never relayed",
        arguments: [
            ": no name\r\n", "Bad Name: x\r\n", "Bad\"Name: x\r\n",
            "no colon at all\r\n", "X-Nul: a\u{0}b\r\n", "X-CR: a\rb\r\n", "Név: x\r\n",
            "Tokenonly\r\n", "X-LF: a\nb\r\n", "X-End-Nul: ab\u{0}\r\n", "X-\u{0}Name: x\r\n",
        ])
    func droppedLines(line: String) {
        var head = headAfterStatus()
        #expect(read(line, into: &head) == .dropped)
        #expect(head.fields.isEmpty)
    }

    @Test(
        "a Content-Length or Transfer-Encoding value with a CR, LF or NUL is told apart, so the transfer refuses the head: libcurl frames the body by it",
        arguments: [
            "Content-Length: 58\rX\r\n", "content-length: 5\u{0}\r\n", "CONTENT-LENGTH:\t7\n8\r\n",
            "Transfer-Encoding: chunked\rX\r\n", "transfer-encoding: chun\u{0}ked\r\n",
        ])
    func unreadableFraming(line: String) {
        var head = headAfterStatus("Content-Length: 41\r\n")
        #expect(read(line, into: &head) == .unreadableFraming)
        #expect(head.fields.count == 1)
        // Other fields with such values are dropped, as before; near-miss names too.
        for bad in [
            "Content-Lengths: 5\rx\r\n", "X-Content-Length: 5\rx\r\n", "Content-Type: a\rb\r\n",
            "Transfer-Encodings: a\u{0}\r\n",
        ] {
            #expect(read(bad, into: &head) == .dropped, "\(bad)")
        }
    }

    @Test("odd but valid names keep their bytes and case; a colon in the value stays")
    func oddNames() {
        var head = UpstreamResponseHead(status: 0)
        _ = read("HTTP/1.1 200 OK\r\n", into: &head)
        #expect(read("x-!#$%&'*+-.^_`|~9: a:b\r\n", into: &head) == .field)
        #expect(head.headers.first?.name == "x-!#$%&'*+-.^_`|~9")
        #expect(head.headers.first?.value == "a:b")
    }

    @Test("a second status line (a new head) forgets the fields of the first")
    func newHeadResets() {
        var head = UpstreamResponseHead(status: 0)
        _ = read("HTTP/1.1 401 Unauthorized\r\n", into: &head)
        _ = read("WWW-Authenticate: Bearer\r\n", into: &head)
        _ = read("HTTP/1.1 200 OK\r\n", into: &head)
        #expect(head.status == 200)
        #expect(head.fields.isEmpty)
    }

    @Test("only the first final head is delivered; trailers after it are not a second head")
    func oneFinalHead() {
        let got = heads(["HTTP/1.1 200 OK\r\n", "A: 1\r\n", "\r\n", "Trailer-Field: t\r\n", "\r\n"])
        #expect(got.count == 1)
        #expect(got.first?.headers.map(\.name) == ["A"])
    }
}

@Suite("UpstreamResponseHead token bytes")
struct ResponseHeadTokenByteTests {
    @Test("field names are read with the tchar masks, which agree with RFC 9110 for every byte value")
    func everyByte() {
        let tchar = Set("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ".utf8)
        for byte in UInt8.min...UInt8.max {
            #expect(ByteClass.isToken(byte) == tchar.contains(byte), "byte \(byte)")
        }
    }
}
