// CCurl as well as Glibc for the socket names: the socket header reaches both modules, and a clean
// build found SOCK_STREAM through Glibc alone missing in files compiled in one batch with another
// importing CCurl. Every file of this target that uses socket names imports both.
import CCurl
import CCurlTuning
import EventLoop
import Glibc
import Testing

@testable import CurlTuning
@testable import Upstream

/// A connected loopback TCP pair (proxy side, upstream side).
private func tcpPair() -> (CInt, CInt) { loopbackTCPPair() }

/// The upstream reads a little of the body, answers `answer` (nothing when empty), and closes
/// with the rest unread: the kernel resets the connection.
private func answerAndReset(_ proxy: CInt, _ upstream: CInt, answer: String) {
    var body = [UInt8](repeating: 0x78, count: 4096)
    precondition(sendto(proxy, &body, body.count, CInt(MSG_NOSIGNAL), nil, 0) == body.count)
    var some = [UInt8](repeating: 0, count: 16)
    precondition(recv(upstream, &some, some.count, 0) > 0)
    var bytes = Array(answer.utf8)
    if !bytes.isEmpty { precondition(sendto(upstream, &bytes, bytes.count, 0, nil, 0) == bytes.count) }
    close(upstream)
    usleep(50_000)
}

private func sendBody(_ fd: CInt) -> Int {
    var bytes = [UInt8](repeating: 0x79, count: 1000)
    tuningOn()
    return sendCoalescingPasses(fd, &bytes, bytes.count, CInt(MSG_NOSIGNAL))
}

private func readAll(_ fd: CInt) -> String {
    var buffer = [UInt8](repeating: 0, count: 1024)
    let count = recvfrom(fd, &buffer, buffer.count, CInt(MSG_DONTWAIT), nil, nil)
    return String(decoding: buffer.prefix(max(count, 0)), as: UTF8.self)
}

@Suite("SendBatch: a send that fails on a reset with the upstream's answer unread")
struct AnsweredBeforeResetTests {
    let loop: EventLoop
    let pass: CurlPass

    init() throws {
        loop = try EventLoop(name: "resets")
        pass = CurlPass(loop: loop)
    }

    @Test("is reported sent during a pass while the answer waits, and fails once it was read")
    func answerWaiting() {
        let (proxy, upstream) = tcpPair()
        defer { close(proxy) }
        let answer = "HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n"
        answerAndReset(proxy, upstream, answer: answer)
        var sent = 0
        pass.run { sent = sendBody(proxy) }
        #expect(sent == 1000)
        #expect(readAll(proxy) == answer)
        var after = 0
        pass.run { after = sendBody(proxy) }
        #expect(after == -1 && (errno == EPIPE || errno == ECONNRESET))
    }

    @Test("fails at once when the upstream reset without answering")
    func nothingToRead() {
        let (proxy, upstream) = tcpPair()
        defer { close(proxy) }
        answerAndReset(proxy, upstream, answer: "")
        var sent = 0
        pass.run { sent = sendBody(proxy) }
        #expect(sent == -1 && errno == ECONNRESET)
    }

    @Test("fails as before outside a pass of libcurl's")
    func outsideAPass() {
        let (proxy, upstream) = tcpPair()
        defer { close(proxy) }
        answerAndReset(proxy, upstream, answer: "HTTP/1.1 413 Content Too Large\r\nContent-Length: 0\r\n\r\n")
        #expect(sendBody(proxy) == -1)
    }
}
