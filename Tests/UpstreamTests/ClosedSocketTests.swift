import CCurl
import Glibc
import Testing

@testable import Upstream

@Suite("ClosedSocket: a spoiled pooled connection reads as closed")
struct ClosedSocketTests {
    @Test("a descriptor holding a stray byte, replaced, finds an EOF at libcurl's liveness peek, and closes as usual")
    func replacedDescriptorReadsAsClosed() {
        var fds: [CInt] = [-1, -1]
        precondition(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0)
        defer { close(fds[1]) }
        #expect(write(fds[1], [UInt8(0x41)], 1) == 1)
        var byte: UInt8 = 0
        // As libcurl 7.88 sees it: a byte to peek at, so "alive".
        #expect(recvfrom(fds[0], &byte, 1, CInt(MSG_PEEK | MSG_DONTWAIT), nil, nil) == 1)
        #expect(ClosedSocket.replace(fds[0]))
        #expect(recvfrom(fds[0], &byte, 1, CInt(MSG_PEEK | MSG_DONTWAIT), nil, nil) == 0)
        #expect(fcntl(fds[0], F_GETFD) & FD_CLOEXEC != 0)
        #expect(close(fds[0]) == 0)
        // The shared closed socket stays open for the next replacement.
        #expect(fcntl(ClosedSocket.descriptor, F_GETFD) >= 0)
    }
}
