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

/// A connected pair whose first end has `pending` bytes to read (the kernel would say readable).
private func readablePair(pending: Int = 1) -> (CInt, CInt) {
    var fds: [CInt] = [-1, -1]
    precondition(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0)
    if pending > 0 { precondition(write(fds[1], [UInt8](repeating: 0x41, count: pending), pending) == pending) }
    return (fds[0], fds[1])
}

private func pollOnce(_ entries: [(CInt, Int16)], timeout: CInt) -> (result: CInt, revents: [Int16]) {
    var fds = entries.map { pollfd(fd: $0.0, events: $0.1, revents: 0x7F) }
    tuningOn()
    let result = pollAnsweringKnownSockets(&fds, nfds_t(fds.count), timeout)
    return (result, fds.map(\.revents))
}

private let readEvents = Int16(POLLIN | POLLPRI | POLLRDNORM | POLLRDBAND)

@Suite("QuietSockets: libcurl's zero-timeout readiness checks")
struct QuietSocketsTests {
    @Test("a zero-timeout check for reading of a quiet socket is answered with nothing ready, without the kernel")
    func quietSocketIsAnswered() {
        let (fd, peer) = readablePair()
        defer { QuietSockets.mark(fd, .unknown); close(fd); close(peer) }
        QuietSockets.mark(fd, .quiet)
        // The kernel would say readable: the answer came from the mark.
        #expect(pollOnce([(fd, readEvents)], timeout: 0) == (0, [0]))
        #expect(pollOnce([(fd, Int16(POLLIN))], timeout: 0) == (0, [0]))
    }

    @Test("while a request with a body may take a connection, a quiet socket's check is the kernel's")
    func strictChecksGoToTheKernel() {
        let (fd, peer) = readablePair()
        defer { QuietSockets.mark(fd, .unknown); close(fd); close(peer) }
        QuietSockets.mark(fd, .quiet)
        var strict: (result: CInt, revents: [Int16]) = (0, [])
        QuietSockets.asking(strictly: true) { strict = pollOnce([(fd, readEvents)], timeout: 0) }
        #expect(strict.result == 1 && strict.revents[0] & Int16(POLLIN) != 0)
        // Only while asked: afterwards, and when not strict, the mark answers.
        #expect(pollOnce([(fd, readEvents)], timeout: 0) == (0, [0]))
        QuietSockets.asking(strictly: false) { strict = pollOnce([(fd, readEvents)], timeout: 0) }
        #expect(strict == (0, [0]))
    }

    @Test(
        "strict checks are the asking thread's own: another thread's check of a quiet socket is answered from its mark")
    func strictChecksArePerThread() throws {
        let (fd, peer) = readablePair()
        defer { QuietSockets.mark(fd, .unknown); close(fd); close(peer) }
        QuietSockets.mark(fd, .quiet)
        final class Answer: @unchecked Sendable { var value: (result: CInt, revents: [Int16]) = (-1, []) }
        let elsewhere = Answer()
        var here: (result: CInt, revents: [Int16]) = (0, [])
        var failure: (any Error)?
        QuietSockets.asking(strictly: true) {
            do {
                let thread = try Threads.spawn { elsewhere.value = pollOnce([(fd, readEvents)], timeout: 0) }
                pthread_join(thread, nil)
            } catch { failure = error }
            here = pollOnce([(fd, readEvents)], timeout: 0)
        }
        #expect(failure == nil)
        #expect(elsewhere.value == (0, [0]))
        #expect(here.result == 1 && here.revents[0] & Int16(POLLIN) != 0)
    }

    @Test(
        "a parked socket's check is the kernel's: nothing ready makes it quiet, anything to read spoils it",
        arguments: [(0, QuietSockets.Mark.quiet), (1, .spoiled)])
    func parkedSocketAsksTheKernelOnce(pending: Int, becomes: QuietSockets.Mark) {
        let (fd, peer) = readablePair(pending: pending)
        defer { QuietSockets.mark(fd, .unknown); close(fd); close(peer) }
        QuietSockets.mark(fd, .parked)
        let answer = pollOnce([(fd, readEvents)], timeout: 0)
        #expect(answer.result == CInt(pending))
        // Bytes on a connection between requests are no response to anything: an error, so
        // libcurl drops it (it would count them as alive, and read them as the next response).
        #expect(answer.revents == [pending > 0 ? QuietSockets.spoiledEvents : 0])
        #expect(QuietSockets.mark(of: fd) == becomes)
    }

    @Test("a spoiled socket's check answers an error without the kernel, readable or not", arguments: [0, 1])
    func spoiledSocketIsAnError(pending: Int) {
        let (fd, peer) = readablePair(pending: pending)
        defer { QuietSockets.mark(fd, .unknown); close(fd); close(peer) }
        QuietSockets.mark(fd, .spoiled)
        #expect(pollOnce([(fd, readEvents)], timeout: 0) == (1, [QuietSockets.spoiledEvents]))
        QuietSockets.asking(strictly: true) {
            #expect(pollOnce([(fd, readEvents)], timeout: 0) == (1, [QuietSockets.spoiledEvents]))
        }
        #expect(QuietSockets.mark(of: fd) == .spoiled)
    }

    @Test(
        "every other call is the kernel's",
        arguments: [
            // (the first socket's mark, include a second socket, timeout)
            (QuietSockets.Mark.unknown, false, CInt(0)),
            (.quiet, true, CInt(0)),  // two sockets: no check libcurl makes for reading
            (.quiet, false, CInt(1)),  // a timeout: a wait, not a check
            (.quiet, false, CInt(-1)),  // waits until ready
            (.parked, false, CInt(1)),
        ])
    func otherCallsGoToTheKernel(mark: QuietSockets.Mark, withSecond: Bool, timeout: CInt) {
        let (fd, peer) = readablePair()
        let (other, otherPeer) = readablePair()
        defer {
            QuietSockets.mark(fd, .unknown)
            QuietSockets.mark(other, .unknown)
            for descriptor in [fd, peer, other, otherPeer] { close(descriptor) }
        }
        QuietSockets.mark(fd, mark)
        QuietSockets.mark(other, mark)
        var entries = [(fd, readEvents)]
        if withSecond { entries.append((other, readEvents)) }
        let answer = pollOnce(entries, timeout: timeout)
        #expect(answer.result == CInt(entries.count))
        #expect(answer.revents.allSatisfy { $0 & Int16(POLLIN) != 0 })
        #expect(QuietSockets.mark(of: fd) == mark)
    }

    @Test("a check for writing is the kernel's, whatever is known of the socket")
    func writeChecksGoToTheKernel() {
        let (fd, peer) = readablePair()
        defer { QuietSockets.mark(fd, .unknown); close(fd); close(peer) }
        QuietSockets.mark(fd, .quiet)
        let both = pollOnce([(fd, readEvents), (fd, Int16(POLLOUT | POLLWRNORM))], timeout: 0)
        #expect(both.result == 2 && both.revents[0] & Int16(POLLIN) != 0 && both.revents[1] & Int16(POLLOUT) != 0)
        #expect(pollOnce([(fd, Int16(POLLOUT))], timeout: 0).result == 1)
        #expect(pollOnce([(fd, readEvents | Int16(POLLOUT))], timeout: 0).result == 1)
    }

    @Test("marks outside the table and negative descriptors are never known")
    func outOfRange() {
        QuietSockets.mark(-1, .quiet)
        QuietSockets.mark(CInt(QuietSockets.capacity), .quiet)
        #expect(QuietSockets.mark(of: -1) == .unknown)
        #expect(QuietSockets.mark(of: CInt(QuietSockets.capacity)) == .unknown)
    }

    @Test(
        "a connected socket parked for reading is marked parked, and quiet once through a wait; watched for reading, watched",
        arguments: [
            // (descriptor offset, established, state, quiet, mark)
            (0, false, CurlSocket.State.unregistered, false, QuietSockets.Mark.unknown),
            (1, false, .watched(.write), false, .unknown),  // connecting: "connected yet?" must reach the kernel
            (2, false, .parked(.read, .unknown), true, .unknown),
            (3, true, .watched(.read), false, .watched),  // registered for reading: empty till the turn ends
            (4, true, .watched([.read, .write]), true, .watched),
            (10, true, .watched(.write), false, .unknown),  // not registered for reading: nothing would report bytes
            (5, true, .parked(.read, .unknown), false, .parked),  // no wait seen through yet: the kernel answers
            (6, true, .parked(.read, .unknown), true, .quiet),  // idle through a wait: an EOF would have been reported
            (7, true, .parked([.read, .write], .unknown), true, .quiet),
            (8, true, .parked(.write, .unknown), true, .unknown),  // parked unable to see an EOF
            (9, true, .unregistered, true, .unknown),  // closed, or dropped
        ])
    func socketStates(offset: Int, established: Bool, state: CurlSocket.State, quiet: Bool, mark: QuietSockets.Mark)
        throws
    {
        let loop = try EventLoop(name: "quiet")
        let client = UpstreamClient(loop: loop, tuning: CurlPass.self)
        // A number no real descriptor has (each case its own): only the mark is looked at.
        let fd = CInt(QuietSockets.capacity - 100 + offset)
        let socket = CurlSocket(fd: fd, client: client, opened: true)
        if established { socket.watchedForReading() }
        socket.state = state
        if quiet { socket.becameQuiet() }
        #expect(socket.readiness == mark)
        #expect(QuietSockets.mark(of: fd) == mark)
        // Any change of state forgets the quiet wait.
        socket.state = state
        #expect(QuietSockets.mark(of: fd) != .quiet)
        socket.state = .unregistered
    }
}

/// One `recv` of `length` bytes with `flags` at `fd`, as libcurl makes it: the result and errno.
private func receiveOnce(_ fd: CInt, length: Int = 1, flags: CInt = QuietSockets.peekFlag) -> (result: Int, errno: CInt)
{
    var buffer = [UInt8](repeating: 0, count: max(length, 1))
    errno = 0
    tuningOn()
    let result = receiveAnsweringKnownSockets(fd, &buffer, length, flags)
    return (result, result < 0 ? errno : 0)
}

/// `readablePair`, its first end non-blocking as libcurl's sockets are.
private func nonBlockingPair(pending: Int) -> (CInt, CInt) {
    let (fd, peer) = readablePair(pending: pending)
    precondition(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) == 0)
    return (fd, peer)
}

@Suite("QuietSockets: libcurl's one-byte peeks at pooled TLS connections")
struct QuietPeekTests {
    @Test(
        "a one-byte peek is answered from the mark as a check for reading is",
        arguments: [
            // (mark, bytes pending, strict, result, errno, mark after)
            (QuietSockets.Mark.quiet, 1, false, -1, EAGAIN, QuietSockets.Mark.quiet),  // the kernel would say 1
            (.quiet, 1, true, 1, 0, .quiet),  // a request with a body may take it: the kernel's
            (.parked, 0, false, -1, EAGAIN, .quiet),  // the kernel's "would block" makes it quiet
            (.parked, 1, false, 0, 0, .spoiled),  // bytes no request asked for: dead, not alive
            (.spoiled, 0, false, 0, 0, .spoiled),
            (.spoiled, 1, true, 0, 0, .spoiled),
            (.unknown, 1, false, 1, 0, .unknown),
            (.unknown, 0, false, -1, EAGAIN, .unknown),
        ])
    func peekTable(
        mark: QuietSockets.Mark, pending: Int, strict: Bool, result: Int, error: CInt,
        after: QuietSockets.Mark
    ) {
        let (fd, peer) = nonBlockingPair(pending: pending)
        defer { QuietSockets.mark(fd, .unknown); close(fd); close(peer) }
        QuietSockets.mark(fd, mark)
        var answer: (result: Int, errno: CInt) = (0, 0)
        QuietSockets.asking(strictly: strict) { answer = receiveOnce(fd) }
        #expect(answer.result == result)
        #expect(answer.errno == error)
        #expect(QuietSockets.mark(of: fd) == after)
    }

    @Test(
        "every other receive is the kernel's, whatever the mark",
        arguments: [QuietSockets.Mark.quiet, .parked, .spoiled])
    func otherReceivesGoToTheKernel(mark: QuietSockets.Mark) {
        let (fd, peer) = nonBlockingPair(pending: 4)
        defer { QuietSockets.mark(fd, .unknown); close(fd); close(peer) }
        QuietSockets.mark(fd, mark)
        #expect(receiveOnce(fd, length: 2).result == 2)  // a peek of more than a byte
        var bytes = [UInt8](repeating: 0, count: 4)
        tuningOn()
        #expect(receiveAnsweringKnownSockets(fd, &bytes, 4, 0) == 4)  // a read
        #expect(bytes == Array("AAAA".utf8))
        #expect(QuietSockets.mark(of: fd) == mark)
    }
}

@Suite("CurlSocket: a parked connection that turns readable")
struct SpoiledSocketTests {
    @Test("is spoiled: libcurl's next check of it answers an error until curl closes it")
    func readableWhileParkedIsSpoiled() throws {
        let loop = try EventLoop(name: "spoiled")
        let client = UpstreamClient(loop: loop, tuning: CurlPass.self)
        let (fd, peer) = readablePair()
        defer { close(fd); close(peer) }
        let socket = CurlSocket(fd: fd, client: client, opened: true)
        try loop.register(fd: fd, interest: .read, target: socket)
        socket.watchedForReading()
        socket.state = .watched(.read)
        socket.park(.read)
        socket.becameQuiet()
        #expect(QuietSockets.mark(of: fd) == .quiet)
        socket.ready(Interest.read.rawValue)
        #expect(socket.link == .spoiled && socket.state == .unregistered)
        #expect(QuietSockets.mark(of: fd) == .spoiled)
        #expect(pollOnce([(fd, readEvents)], timeout: 0) == (1, [QuietSockets.spoiledEvents]))
        // Closed through curl's callback: the number is free of any mark.
        socket.state = .unregistered
        QuietSockets.mark(fd, .unknown)
        #expect(QuietSockets.mark(of: fd) == .unknown)
    }
}

@Suite("ParkedSockets: quiet once a later wait was dispatched")
struct ParkedSocketsTests {
    enum Then { case nothing, watchedAgain, parkedAgain, closed }

    @Test(
        "a parking becomes quiet when a batch after its iteration was dispatched, if the socket is parked still",
        arguments: [
            // (descriptor offset, parked in iteration, batches dispatched, then, quiet)
            (20, 5, 4, Then.nothing, false),  // parked before this iteration's batch was dispatched
            (21, 5, 5, .nothing, false),  // parked while iteration 5 ran: its wait came before
            (22, 5, 6, .nothing, true),  // iteration 6's wait came after the parking
            (23, 5, 9, .nothing, true),
            (24, 5, 6, .watchedAgain, false),  // a transfer took it meanwhile
            (25, 5, 6, .parkedAgain, false),  // parked again in iteration 6: that parking waits on
            (26, 5, 6, .closed, false),
        ])
    func promotion(offset: Int, parkedIn: Int, dispatched: Int, then: Then, quiet: Bool) throws {
        let loop = try EventLoop(name: "parked")
        let client = UpstreamClient(loop: loop, tuning: CurlPass.self)
        let fd = CInt(QuietSockets.capacity - 100 + offset)
        let socket = CurlSocket(fd: fd, client: client, opened: true)
        socket.watchedForReading()
        socket.state = .watched(.read)
        var parked = ParkedSockets()
        socket.park(.read)
        parked.add(socket, iteration: parkedIn)
        switch then {
        case .nothing: break
        case .watchedAgain: socket.state = .watched(.read)
        case .parkedAgain:
            socket.state = .watched(.read)
            socket.park(.read)
            parked.add(socket, iteration: dispatched)
        case .closed: socket.state = .unregistered
        }
        parked.promote(dispatched: dispatched)
        #expect((socket.state == .parked(.read, .quiet)) == quiet)
        let mark: QuietSockets.Mark =
            switch then {
            case .nothing: quiet ? .quiet : .parked
            case .parkedAgain: .parked
            case .watchedAgain: .watched
            case .closed: .unknown
            }
        #expect(QuietSockets.mark(of: fd) == mark)
        // Promoted entries leave the list; later parkings stay.
        #expect(parked.count == (parkedIn < dispatched ? (then == .parkedAgain ? 1 : 0) : 1))
        socket.state = .unregistered
    }
}

@Suite("QuietSockets: sockets curl watches, found empty in a loop turn")
final class WatchedSocketTests {
    /// A watched socket with nothing to read, its peer to write to, and a pass of `loop`'s (the
    /// suite holds the loop, as the client that owns a pass does).
    let fd: CInt
    let peer: CInt
    let loop: EventLoop
    let pass: CurlPass

    init() throws {
        (fd, peer) = nonBlockingPair(pending: 0)
        QuietSockets.mark(fd, .watched)
        loop = try EventLoop(name: "watched")
        pass = CurlPass(loop: loop)
    }

    deinit {
        QuietSockets.mark(fd, .unknown)
        close(fd)
        close(peer)
    }

    @Test("once a check found it empty, later checks in the turn are answered without the kernel")
    func emptyCheckIsRemembered() {
        pass.run {
            #expect(pollOnce([(fd, readEvents)], timeout: 0) == (0, [0]))
            // Bytes that come now are the next wait's to report (the loop has the socket
            // registered for reading): the answer is the kernel's of a moment ago.
            #expect(write(peer, "x", 1) == 1)
            #expect(pollOnce([(fd, readEvents)], timeout: 0) == (0, [0]))
            #expect(receiveOnce(fd, length: 64, flags: 0) == (-1, EAGAIN))
        }
        // A pass in the same turn still knows it.
        pass.run { #expect(pollOnce([(fd, readEvents)], timeout: 0) == (0, [0])) }
        // The next turn's wait reported the bytes: the kernel answers again.
        loop.runOnce(timeoutMilliseconds: 0)
        pass.run {
            let answer = pollOnce([(fd, readEvents)], timeout: 0)
            #expect(answer.result == 1 && answer.revents[0] & Int16(POLLIN) != 0)
            #expect(receiveOnce(fd, length: 64, flags: 0) == (1, 0))
        }
    }

    @Test("a read that would block is remembered like a check that found nothing")
    func wouldBlockIsRemembered() {
        pass.run {
            #expect(receiveOnce(fd, length: 64, flags: 0) == (-1, EAGAIN))
            #expect(write(peer, "x", 1) == 1)
            #expect(pollOnce([(fd, readEvents)], timeout: 0) == (0, [0]))
        }
        loop.runOnce(timeoutMilliseconds: 0)
        pass.run { #expect(receiveOnce(fd, length: 64, flags: 0) == (1, 0)) }
    }

    @Test(
        "outside a pass, for a socket with bytes, or once curl closed it, the kernel answers",
        arguments: ["no pass", "bytes", "closed"])
    func otherwiseTheKernel(case name: String) {
        switch name {
        case "no pass":
            // Nothing is remembered outside a pass.
            #expect(pollOnce([(fd, readEvents)], timeout: 0) == (0, [0]))
            #expect(write(peer, "x", 1) == 1)
            #expect(pollOnce([(fd, readEvents)], timeout: 0).result == 1)
        case "bytes":
            #expect(write(peer, "x", 1) == 1)
            pass.run {
                #expect(pollOnce([(fd, readEvents)], timeout: 0).result == 1)
                #expect(receiveOnce(fd, length: 64, flags: 0) == (1, 0))
            }
        default:
            pass.run {
                #expect(pollOnce([(fd, readEvents)], timeout: 0) == (0, [0]))
                pass.forget(fd)
                #expect(write(peer, "x", 1) == 1)
                #expect(pollOnce([(fd, readEvents)], timeout: 0).result == 1)
            }
        }
    }

    @Test("a read with flags, and a peek, are the kernel's")
    func flaggedReadsAreTheKernels() {
        pass.run {
            #expect(pollOnce([(fd, readEvents)], timeout: 0) == (0, [0]))
            #expect(write(peer, "xy", 2) == 2)
            #expect(receiveOnce(fd, length: 1, flags: QuietSockets.peekFlag) == (1, 0))
            #expect(receiveOnce(fd, length: 64, flags: CInt(MSG_PEEK)) == (2, 0))
        }
    }
}
