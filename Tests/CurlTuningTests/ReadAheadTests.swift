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

/// A connected non-blocking pair; `bytes` are waiting on the first end.
private func pair(with bytes: [UInt8]) -> (CInt, CInt) {
    var fds: [CInt] = [-1, -1]
    precondition(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0)
    precondition(fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK) == 0)
    if !bytes.isEmpty { precondition(write(fds[1], bytes, bytes.count) == bytes.count) }
    return (fds[0], fds[1])
}

/// One `recv` through the executable's `recv`: the bytes read, or nil and errno.
private func receive(_ fd: CInt, _ length: Int, flags: CInt = 0) -> (bytes: [UInt8]?, errno: CInt) {
    var buffer = [UInt8](repeating: 0, count: length)
    errno = 0
    tuningOn()
    let got = receiveAnsweringKnownSockets(fd, &buffer, length, flags)
    return got < 0 ? (nil, errno) : (Array(buffer[..<got]), 0)
}

private func check(
    _ fd: CInt, events: Int16 = Int16(POLLIN | POLLPRI | POLLRDNORM | POLLRDBAND),
    alsoWriting: Bool = false
) -> (result: CInt, revents: Int16) {
    var fds = [pollfd(fd: fd, events: events, revents: 0)]
    if alsoWriting { fds.append(pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)) }
    tuningOn()
    let result = pollAnsweringKnownSockets(&fds, nfds_t(fds.count), 0)
    return (result, fds[0].revents)
}

private let bytes = (0..<100).map { UInt8($0) }

@Suite("ReadAhead: a TLS record header's read takes what the socket holds")
final class ReadAheadTests {
    let fd: CInt
    let peer: CInt
    let loop: EventLoop
    let pass: CurlPass

    init() throws {
        (fd, peer) = pair(with: bytes)
        QuietSockets.mark(fd, .watched)
        loop = try EventLoop(name: "read-ahead")
        pass = CurlPass(loop: loop)
    }

    deinit {
        pass.forget(fd)
        QuietSockets.mark(fd, .unknown)
        close(fd)
        close(peer)
    }

    @Test("a short read of a watched socket takes what it holds; the next reads are answered from that, in order")
    func laterReadsComeFromTheBlock() {
        pass.run {
            #expect(receive(fd, 5).bytes == Array(bytes[0..<5]))
            #expect(ReadAhead.count(fd) == 95)
            // The kernel has nothing left: these come from the block.
            #expect(receive(fd, 50).bytes == Array(bytes[5..<55]))
            #expect(write(peer, [UInt8]([200, 201]), 2) == 2)  // after what was read ahead
            #expect(receive(fd, 64).bytes == Array(bytes[55..<100]))
            #expect(ReadAhead.count(fd) == 0 && ReadAhead.block(of: fd) == nil)
            #expect(receive(fd, 64).bytes == [200, 201])
            #expect(receive(fd, 5) == (nil, EAGAIN))
        }
        #expect(pass.holding.isEmpty && !pass.stalled)
    }

    @Test(
        "a long read, a read outside a pass, and a read of a socket curl does not watch for reading go to the kernel",
        arguments: ["long", "no pass", "unwatched"])
    func otherReadsAreTheKernels(case name: String) {
        switch name {
        case "long":
            pass.run { #expect(receive(fd, ReadAhead.shortRead + 1).bytes == Array(bytes[0...ReadAhead.shortRead])) }
        case "no pass": #expect(receive(fd, 5).bytes == Array(bytes[0..<5]))
        default:
            QuietSockets.mark(fd, .unknown)
            pass.run { #expect(receive(fd, 5).bytes == Array(bytes[0..<5])) }
        }
        #expect(ReadAhead.block(of: fd) == nil)
        #expect(receive(fd, 100).bytes?.count == (name == "long" ? 100 - ReadAhead.shortRead - 1 : 95))
    }

    @Test(
        "a socket holding bytes is readable to a check, alone or with another socket, and a peek sees them without taking them"
    )
    func heldBytesAreReadable() {
        pass.run {
            _ = receive(fd, 5)
            // Found empty in this turn: without the bytes held, the answer would be "nothing".
            pass.empty.note(fd, turn: pass.turn)
        }
        pass.run {
            #expect(check(fd) == (1, Int16(POLLIN | POLLRDNORM)))
            let both = check(fd, alsoWriting: true)
            #expect(both.result == 2 && both.revents == Int16(POLLIN | POLLRDNORM))
            #expect(receive(fd, 3, flags: CInt(MSG_PEEK)).bytes == Array(bytes[5..<8]))
            #expect(receive(fd, 1, flags: QuietSockets.peekFlag).bytes == [5])
            #expect(ReadAhead.count(fd) == 95)
        }
        #expect(QuietSockets.mark(of: fd) == .watched)
        // Outside a pass too, and a read with other flags takes them.
        #expect(check(fd).result == 1)
        #expect(receive(fd, 10, flags: CInt(MSG_DONTWAIT)).bytes == Array(bytes[5..<15]))
        #expect(ReadAhead.count(fd) == 85)
    }

    @Test(
        "a parked socket holding bytes is spoiled by its check, as one the kernel found readable is",
        arguments: [QuietSockets.Mark.parked, .quiet, .spoiled])
    func parkedWithHeldBytesIsSpoiled(mark: QuietSockets.Mark) {
        pass.run { _ = receive(fd, 5) }
        QuietSockets.mark(fd, mark)
        #expect(check(fd) == (1, QuietSockets.spoiledEvents))
        #expect(QuietSockets.mark(of: fd) == .spoiled)
        // TLS HTTP/1.1's liveness check, a one-byte peek: an EOF, never "alive".
        QuietSockets.mark(fd, mark)
        #expect(receive(fd, 1, flags: QuietSockets.peekFlag).bytes == [])
        #expect(QuietSockets.mark(of: fd) == .spoiled)
        QuietSockets.asking(strictly: true) { #expect(check(fd) == (1, QuietSockets.spoiledEvents)) }
        #expect(ReadAhead.count(fd) == 95)
    }

    @Test("curl's closing the socket drops what it held")
    func closingDropsTheBlock() {
        pass.run { _ = receive(fd, 5) }
        #expect(pass.holding == [fd])
        pass.forget(fd)
        #expect(ReadAhead.block(of: fd) == nil && pass.holding.isEmpty)
        #expect(check(fd).result == 0)
    }

    @Test("at a pass's end a watched socket holding bytes is run again while that reads some")
    func heldBytesAreRunAgain() {
        var runs = 0
        pass.rerun = { [fd] socket in
            #expect(socket == fd)
            runs += 1
            _ = receive(socket, 5)  // a record header, then its body, as OpenSSL reads
            _ = receive(socket, 15)
            return true
        }
        pass.run { #expect(receive(fd, 5).bytes == Array(bytes[0..<5])) }
        // 95 bytes held: 20 a run, and the fifth run empties the block.
        #expect(runs == 5 && ReadAhead.count(fd) == 0 && !pass.stalled)
        #expect(pass.holding.isEmpty)
    }

    @Test(
        "a run that reads nothing leaves the pass stalled, for the loop's next turn to run again; a socket curl does not watch is left",
        arguments: [true, false])
    func aRunThatReadsNothingStalls(watched: Bool) {
        var runs = 0
        pass.rerun = { _ in
            if watched { runs += 1 }
            return watched
        }
        pass.run { _ = receive(fd, 5) }
        #expect(runs == (watched ? 1 : 0))
        #expect(pass.stalled == watched)
        #expect(pass.stalledSockets() == [fd])
        #expect(!pass.stalled)
        #expect(ReadAhead.count(fd) == 95)
    }

    @Test("a pass keeps blocks for a bounded number of sockets; a short read of another goes to the kernel")
    func boundedSockets() {
        let others = (0..<ReadAhead.socketsPerPass).map { _ in pair(with: bytes) }
        defer {
            for (other, otherPeer) in others {
                pass.forget(other)
                QuietSockets.mark(other, .unknown)
                close(other)
                close(otherPeer)
            }
        }
        pass.rerun = { _ in false }
        pass.run {
            for (other, _) in others {
                QuietSockets.mark(other, .watched)
                _ = receive(other, 5)
            }
            #expect(receive(fd, 5).bytes == Array(bytes[0..<5]))
        }
        #expect(pass.holding.count == ReadAhead.socketsPerPass && ReadAhead.block(of: fd) == nil)
        #expect(receive(fd, 100).bytes?.count == 95)
    }
}

/// A client of its own loop with the suite's socket as one of curl's connections, opened through
/// the client and watched for reading, holding 95 bytes read ahead; its runs counted.
@Suite("UpstreamClient: sockets holding bytes read ahead")
final class ClientReadAheadTests {
    let fd: CInt
    let peer: CInt
    let loop: EventLoop
    let client: UpstreamClient
    /// The client's tuning.
    let pass: CurlPass
    let socket: CurlSocket
    var runs = 0
    var reading = false

    init() throws {
        (fd, peer) = pair(with: bytes)
        loop = try EventLoop(name: "client-read-ahead")
        client = UpstreamClient(loop: loop, tuning: CurlPass.self)
        pass = try #require(client.tuning as? CurlPass)
        socket = CurlSocket(fd: fd, client: client, opened: true)
        client.sockets[fd] = socket
        client.socketChanged(fd, CC_POLL_IN)
        // The client's own, with a read for curl's.
        pass.rerun = { [unowned self] socket in
            guard client.watchesForReading(socket) else { return false }
            runs += 1
            if reading { _ = receive(socket, 100) }
            return true
        }
        pass.run { _ = receive(fd, 5) }
        runs = 0
    }

    /// Closed as curl closes a connection (`UpstreamClient.closeSocket`): the number's mark is
    /// cleared before it is freed. Closing it here by hand left a spoiled socket's mark on the
    /// number, which another test's descriptor then took (its zero-timeout poll answered
    /// "readable"; a fresh-clone CI run failed on it).
    deinit {
        _ = client.closeSocket(fd)
        close(peer)
    }

    @Test(
        "bytes a run left unread are run again at each loop turn until read, as a level-triggered wait would report them"
    )
    func stalledSocketsAreRunAtTheNextTurn() {
        #expect(QuietSockets.mark(of: fd) == .watched && ReadAhead.count(fd) == 95)
        // curl knows no such socket: the client's own call reads nothing, as curl's transfers
        // all waiting for something else would; the pass's end runs it once more, in vain.
        client.socketAction(fd: fd, events: CC_CSELECT_IN)
        #expect(runs == 1 && pass.stalled)
        // The next turns: the wait does not block (the run is due), and the socket is run again.
        loop.runOnce(timeoutMilliseconds: 1000)
        #expect(runs == 2 && ReadAhead.count(fd) == 95)
        reading = true
        loop.runOnce(timeoutMilliseconds: 1000)
        #expect(runs == 3 && ReadAhead.count(fd) == 0 && !pass.stalled)
        loop.runOnce(timeoutMilliseconds: 0)
        #expect(runs == 3)
    }

    @Test("a connection parked holding bytes calls the reaper, and its check finds it spoiled")
    func parkedHoldingBytesIsReaped() {
        #expect(client.reaper == nil)
        client.socketChanged(fd, CC_POLL_REMOVE)
        #expect(client.reaper != nil)
        #expect(socket.state == .parked(.read, .unknown))
        var entry = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0)]
        tuningOn()
        #expect(pollAnsweringKnownSockets(&entry, 1, 0) == 1 && entry[0].revents == QuietSockets.spoiledEvents)
        // The stalled run skips a socket curl does not watch.
        client.socketAction(fd: fd, events: CC_CSELECT_IN)
        loop.runOnce(timeoutMilliseconds: 0)
        #expect(runs == 0)
    }

    @Test(
        "a paused transfer's socket, parked and then reported readable, is run when curl watches it again",
        arguments: [false, true])
    func resumedSocketIsRun(reported: Bool) {
        reading = true
        client.socketChanged(fd, CC_POLL_REMOVE)
        if reported { socket.ready(Interest.read.rawValue) }  // more came while it was paused
        #expect(runs == 0)
        client.socketChanged(fd, CC_POLL_IN)
        #expect(QuietSockets.mark(of: fd) == (reported ? .spoiled : .watched))
        loop.runOnce(timeoutMilliseconds: 1000)
        #expect(runs == 1 && ReadAhead.count(fd) == 0)
    }
}
