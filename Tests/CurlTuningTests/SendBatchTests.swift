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

/// A connected loopback TCP pair (sender, receiver), the sender with TCP_NODELAY as libcurl sets it.
private func tcpPair() -> (CInt, CInt) { loopbackTCPPair(noDelay: true) }

/// What `fd` has to read within `milliseconds` (all of it, once something came).
private func received(_ fd: CInt, within milliseconds: CInt) -> String {
    var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
    guard poll(&entry, 1, milliseconds) == 1 else { return "" }
    var buffer = [UInt8](repeating: 0, count: 256)
    let count = recv(fd, &buffer, buffer.count, CInt(MSG_DONTWAIT))
    return String(decoding: buffer.prefix(max(count, 0)), as: UTF8.self)
}

/// Bytes the kernel holds for `fd`, sent or not, not yet acknowledged (SIOCOUTQ).
private func unacknowledged(_ fd: CInt) -> CInt {
    var count: CInt = 0
    precondition(ioctl(fd, UInt(TIOCOUTQ), &count) == 0)
    return count
}

private func send(_ fd: CInt, _ text: String) {
    var bytes = Array(text.utf8)
    tuningOn()
    precondition(sendCoalescingPasses(fd, &bytes, bytes.count, CInt(MSG_NOSIGNAL)) == bytes.count)
}

@Suite("SendBatch: libcurl's sends during one pass leave together per socket")
struct SendBatchTests {
    /// A pass of a loop's (each test has its own); the suite holds the loop, as a client does.
    let loop: EventLoop
    let pass: CurlPass

    init() throws {
        loop = try EventLoop(name: "sends")
        pass = CurlPass(loop: loop)
    }

    /// Sends `texts` in one pass, waits until `receiver` has them and they are acknowledged, and
    /// returns what it got. The socket is busy then, so the next pass holds even its first send,
    /// and with nothing in flight no acknowledgement can push that: only the pass's end (or a close).
    private func passThenIdle(_ sender: CInt, _ receiver: CInt, _ texts: [String]) -> String {
        pass.run { for text in texts { send(sender, text) } }
        var got = ""
        let count = texts.joined().count
        for _ in 0..<20 where got.count < count { got += received(receiver, within: 100) }
        for _ in 0..<200 where unacknowledged(sender) > 0 { usleep(5_000) }
        return got
    }

    @Test("the first send to a socket in a pass goes as asked, later ones with MSG_MORE")
    func flagsWithinAPass() {
        let nosignal = CInt(MSG_NOSIGNAL)
        pass.run {
            #expect(pass.sends.flags(sendingTo: 7, nosignal) == nosignal)
            #expect(pass.sends.flags(sendingTo: 7, nosignal) == nosignal | SendBatch.more)
            #expect(pass.sends.flags(sendingTo: 8, 0) == 0)
            #expect(pass.sends.flags(sendingTo: 7, 0) == SendBatch.more)
            // A nested pass (an unpause from a callback) joins the outer one.
            pass.run { #expect(pass.sends.flags(sendingTo: 8, 0) == SendBatch.more) }
            #expect(pass.sends.flags(sendingTo: 8, 0) == SendBatch.more)
        }
    }

    @Test("a socket that had several sends in its last pass holds its first one too, until a pass sends it one")
    func busySocketsHoldTheFirstSend() {
        let (sender, receiver) = tcpPair()
        defer { close(sender); close(receiver) }
        pass.run {
            _ = pass.sends.flags(sendingTo: sender, 0)
            _ = pass.sends.flags(sendingTo: sender, 0)
        }
        pass.run { #expect(pass.sends.flags(sendingTo: sender, 0) == SendBatch.more) }
        // That pass sent it one: the next pass's first send goes as asked.
        pass.run { #expect(pass.sends.flags(sendingTo: sender, 0) == 0) }
    }

    @Test("a socket curl closes in the pass is pushed before the close, and its number starts afresh")
    func forgottenSocket() {
        pass.run {
            _ = pass.sends.flags(sendingTo: 9, 0)
            _ = pass.sends.flags(sendingTo: 9, 0)
            pass.forget(9)
            #expect(pass.sends.flags(sendingTo: 9, 0) == 0)
        }
        pass.run { #expect(pass.sends.flags(sendingTo: 9, 0) == 0) }
    }

    @Test("what a socket curl closes in the pass held leaves before the close")
    func heldSendsLeaveBeforeAClose() {
        let (sender, receiver) = tcpPair()
        defer { close(sender); close(receiver) }
        #expect(passThenIdle(sender, receiver, ["a", "b"]) == "ab")
        pass.run {
            send(sender, "c")
            #expect(received(receiver, within: 50) == "")
            pass.forget(sender)
            #expect(received(receiver, within: 100) == "c")
        }
    }

    @Test("outside a pass every send goes at once")
    func outsideAPass() {
        let (sender, receiver) = tcpPair()
        defer { close(sender); close(receiver) }
        send(sender, "a")
        #expect(received(receiver, within: 1000) == "a")
        send(sender, "b")
        #expect(received(receiver, within: 1000) == "b")
    }

    @Test("what a pass held leaves when the pass ends, and not before")
    func heldSendsLeaveAtTheEndOfThePass() {
        let (sender, receiver) = tcpPair()
        defer { close(sender); close(receiver) }
        #expect(passThenIdle(sender, receiver, ["a", "b", "c"]) == "abc")
        pass.run {
            send(sender, "d")
            #expect(unacknowledged(sender) == 1)
            #expect(received(receiver, within: 50) == "")
        }
        // At once: unpushed, the kernel would send it when its 200 ms ceiling on held data ran out.
        #expect(received(receiver, within: 100) == "d")
    }
}
