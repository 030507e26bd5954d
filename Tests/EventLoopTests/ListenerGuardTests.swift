import Glibc
import Testing

@testable import EventLoop

@Suite("Listener guards")
struct ListenerGuardTests {
    private func scratch() -> String {
        var template = Array("/tmp/pp-guard-XXXXXX".utf8CString)
        let dir = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)) }
        return dir
    }

    @Test("errors name the address")
    func messages() {
        #expect(
            ListenError.inUse(.tcp(host: "127.0.0.1", port: 8080)).description
                == "address 127.0.0.1:8080 already in use")
        #expect(
            ListenError.cannotBind(.unix(path: "/x/p.sock"), IOError(errnoCode: ENOENT, call: "bind")).description
                .hasPrefix("cannot listen on unix:/x/p.sock: bind failed"))
        #expect(
            ListenError.cannotBind(.tcp(host: "::1", port: 80), IOError(errnoCode: EADDRINUSE, call: "bind")).isInUse)
    }

    @Test("a regular file at a unix: path is never removed")
    func regularFile() throws {
        let dir = scratch()
        let path = dir + "/file"
        let fd = open(path, O_CREAT | O_WRONLY, 0o600)
        close(fd)
        #expect(throws: ListenError.notASocket(.unix(path: path), kind: "a regular file")) {
            try Socket.clearStaleUnixSocket(path)
        }
        #expect(access(path, F_OK) == 0)
        unlink(path)
        rmdir(dir)
    }

    @Test("nothing at the path is fine; a stale socket is removed; a live one is in use")
    func sockets() throws {
        let dir = scratch()
        let path = dir + "/s.sock"
        try Socket.clearStaleUnixSocket(path)
        let live = try Socket.listen(.unix(path: path), reusePort: false)
        #expect(throws: ListenError.inUse(.unix(path: path))) { try Socket.clearStaleUnixSocket(path) }
        close(live)
        // Closed without unlinking: the file stays and connecting is refused.
        #expect(access(path, F_OK) == 0)
        try Socket.clearStaleUnixSocket(path)
        #expect(access(path, F_OK) != 0)
        rmdir(dir)
    }

    @Test("a fixed TCP port someone listens on fails the exclusivity probe; a free one passes")
    func probe() throws {
        let first = try Socket.listen(.tcp(host: "127.0.0.1", port: 0), reusePort: true)
        let port = try Socket.boundPort(first)
        #expect(throws: ListenError.inUse(.tcp(host: "127.0.0.1", port: port))) {
            try Socket.probeExclusive(host: "127.0.0.1", port: port)
        }
        close(first)
        try Socket.probeExclusive(host: "127.0.0.1", port: port)
    }
}
