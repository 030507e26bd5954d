import Testing

@testable import Proxy

@Suite("TunnelAnswer")
struct TunnelAnswerTests {
    private func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

    @Test(
        "interim heads before the answer are dropped; the answer, a partial head and what follows stay",
        arguments: [
            (
                "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 101 Switching\r\n\r\nframe",
                "HTTP/1.1 101 Switching\r\n\r\nframe"
            ),
            (
                "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 102 Processing\r\n\r\nHTTP/1.1 403 No\r\n\r\n",
                "HTTP/1.1 403 No\r\n\r\n"
            ),
            (
                "HTTP/1.1 101 Switching\r\n\r\nHTTP/1.1 103 x\r\n\r\n",
                "HTTP/1.1 101 Switching\r\n\r\nHTTP/1.1 103 x\r\n\r\n"
            ),
            ("HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n", "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n"),
            ("HTTP/1.1 103 Early Hints\r\n\r\n", ""),
            ("garbage\r\n\r\nHTTP/1.1 101 x\r\n\r\n", "garbage\r\n\r\nHTTP/1.1 101 x\r\n\r\n"),
        ])
    func droppingInterim(input: String, kept: String) {
        var answer = bytes(input)
        TunnelAnswer.droppingInterim(&answer)
        #expect(answer == bytes(kept))
    }
}
