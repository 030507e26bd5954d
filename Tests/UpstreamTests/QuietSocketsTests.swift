import EventLoop
import Glibc
import Testing
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
    let result = pollAnsweringKnownSockets(&fds, nfds_t(fds.count), timeout)
    return (result, fds.map(\.revents))
}

private let readEvents = Int16(POLLIN | POLLPRI | POLLRDNORM | POLLRDBAND)

@Suite("QuietSockets: libcurl's zero-timeout readiness checks")
struct QuietSocketsTests {
    @Test("a zero-timeout check of a known socket is answered with nothing ready, without the kernel")
    func knownSocketIsAnswered() {
        let (fd, peer) = readablePair()
        defer { QuietSockets.mark(fd, known: false); close(fd); close(peer) }
        QuietSockets.mark(fd, known: true)
        // The kernel would say readable: the answer came from the mark.
        #expect(pollOnce([(fd, readEvents)], timeout: 0) == (0, [0]))
        // libcurl's check for reading and writing passes the socket twice.
        #expect(pollOnce([(fd, readEvents), (fd, Int16(POLLOUT | POLLWRNORM))], timeout: 0) == (0, [0, 0]))
    }

    @Test("every other call is the kernel's",
          arguments: [
            // (mark the first socket, include an unknown second socket, timeout)
            (false, false, CInt(0)),   // not known
            (true, true, CInt(0)),     // one of two not known
            (true, false, CInt(1)),    // a timeout: a wait, not a check
            (true, false, CInt(-1)),   // waits until ready
          ])
    func otherCallsGoToTheKernel(mark: Bool, withUnknown: Bool, timeout: CInt) {
        let (fd, peer) = readablePair()
        let (other, otherPeer) = readablePair()
        defer {
            QuietSockets.mark(fd, known: false)
            for descriptor in [fd, peer, other, otherPeer] { close(descriptor) }
        }
        QuietSockets.mark(fd, known: mark)
        var entries = [(fd, readEvents)]
        if withUnknown { entries.append((other, readEvents)) }
        let answer = pollOnce(entries, timeout: timeout)
        #expect(answer.result == CInt(entries.count))
        #expect(answer.revents.allSatisfy { $0 & Int16(POLLIN) != 0 })
    }

    @Test("marks outside the table and negative descriptors are never known")
    func outOfRange() {
        QuietSockets.mark(-1, known: true)
        QuietSockets.mark(CInt(QuietSockets.capacity), known: true)
        #expect(!QuietSockets.isKnown(-1))
        #expect(!QuietSockets.isKnown(CInt(QuietSockets.capacity)))
    }

    @Test("a socket is known once it connected and while it is parked for reading",
          arguments: [
            // (descriptor offset, established, state, known)
            (0, false, CurlSocket.State.unregistered, false),
            (1, false, .watched(.write), false),              // connecting: "connected yet?" must reach the kernel
            (2, false, .watched(.read), false),
            (3, false, .parked(.read), false),
            (4, true, .watched(.read), false),                // curl reads on while the kernel says data is pending
            (5, true, .watched(.write), false),
            (6, true, .watched([.read, .write]), false),
            (7, true, .parked(.read), true),                  // idle: its EOF would have been reported
            (8, true, .parked([.read, .write]), true),
            (9, true, .parked(.write), false),                // parked unable to see an EOF
            (10, true, .unregistered, false),                 // readable while parked, or dropped
          ])
    func socketStates(offset: Int, established: Bool, state: CurlSocket.State, known: Bool) throws {
        let loop = try EventLoop(name: "quiet")
        let client = UpstreamClient(loop: loop)
        // A number no real descriptor has (each case its own): only the mark is looked at.
        let fd = CInt(QuietSockets.capacity - 100 + offset)
        let socket = CurlSocket(fd: fd, client: client, opened: true)
        socket.established = established
        socket.state = state
        #expect(socket.readinessKnown == known)
        #expect(QuietSockets.isKnown(fd) == known)
        socket.state = .unregistered
        #expect(!QuietSockets.isKnown(fd))
    }
}
