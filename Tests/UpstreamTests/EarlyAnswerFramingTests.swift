import Testing

@testable import Upstream

/// The early answer kept from a closing connection is relayed only when it is whole and needs no
/// decoding (`UpstreamTransfer.frame`).
@Suite("UpstreamTransfer: framing an early answer read from a closed connection")
struct EarlyAnswerFramingTests {
    @Test(
        "whole answers are framed, others are not relayed",
        arguments: [
            // (bytes, libcurl decodes, head end, body) — nil: not relayed
            ("HTTP/1.1 401 No\r\nContent-Length: 2\r\n\r\nno", false, 38, "no"),
            ("HTTP/1.1 401 No\r\nContent-Length: 2\r\n\r\nnoMORE", false, 38, "no"),  // bytes past it dropped
            ("HTTP/1.1 413 Big\r\nContent-Length: 9\r\n\r\nshort", false, nil, nil),  // cut short
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n", false, nil, nil),
            ("HTTP/1.1 204 No Content\r\n\r\n", false, 27, ""),
            ("HTTP/1.1 403 No\r\n\r\nuntil the end", false, 19, "until the end"),  // framed by the close
            ("HTTP/1.1 401 No\r\nContent-Encoding: gzip\r\nContent-Length: 2\r\n\r\nzz", true, nil, nil),
            ("HTTP/1.1 401 No\r\nContent-Encoding: gzip\r\nContent-Length: 2\r\n\r\nzz", false, 62, "zz"),
            ("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 401 No\r\nContent-Length: 0\r\n\r\n", false, 63, ""),
            ("HTTP/1.1 401 No\r\nContent-Length: 2\r\n", false, nil, nil),  // head cut short
            ("HTTP/1.1 401 No\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nnon", false, nil, nil),
        ] as [(String, Bool, Int?, String?)])
    func frames(text: String, decodes: Bool, headEnd: Int?, body: String?) {
        let bytes = Array(text.utf8)
        let framing = UpstreamTransfer.frame(bytes, decodes: decodes, reachesEnd: true)
        #expect(framing?.headEnd == headEnd)
        #expect(framing.map { String(decoding: bytes[$0.body], as: UTF8.self) } == body)
    }

    @Test(
        "bytes that stop short of the connection's end frame only answers with their own length",
        arguments: [
            // (bytes, head end, body) — nil: not relayed
            ("HTTP/1.1 200 OK\r\n\r\nthe first of many bytes", nil, nil),  // framed by the end, which was not read
            ("HTTP/1.1 401 No\r\nContent-Length: 2\r\n\r\nnoMORE", 38, "no"),
            ("HTTP/1.1 204 No Content\r\n\r\n", 27, ""),
        ] as [(String, Int?, String?)])
    func framesCut(text: String, headEnd: Int?, body: String?) {
        let bytes = Array(text.utf8)
        let framing = UpstreamTransfer.frame(bytes, decodes: false, reachesEnd: false)
        #expect(framing?.headEnd == headEnd)
        #expect(framing.map { String(decoding: bytes[$0.body], as: UTF8.self) } == body)
    }
}
