import Dispatch
import Glibc
import Testing

@testable import EventLoop

/// The start lock is an abstract socket name per port: taken by binding it, waited for with a
/// deadline, and never a file. Ports below 1024 are used because no test proxy listens there, so
/// holding their lock delays nobody else's start.
@Suite("Start lock")
struct StartLockTests {
    /// A socket bound to the lock's abstract name, as another process (or user) would hold it.
    private func holdName(port: UInt16) -> CInt {
        let fd = socket(AF_UNIX, CInt(SOCK_STREAM.rawValue) | CInt(SOCK_CLOEXEC.rawValue), 0)
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(StartLock.name(port: port).utf8)
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            raw.baseAddress!.advanced(by: 1).copyMemory(from: bytes, byteCount: bytes.count)
        }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + 1 + bytes.count)
        let result = withUnsafePointer(to: &addr) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
        }
        #expect(result == 0, "the test could not bind the lock's name")
        return fd
    }

    @Test("a free lock is taken at once and freed when dropped")
    func takeAndFree() {
        var start = NanoTime.now()
        do {
            let first = StartLock(port: 7, deadline: 5)
            let held = first.isHeld
            #expect(held)
            #expect(NanoTime.now().seconds(since: start) < 1)
        }
        start = NanoTime.now()
        let again = StartLock(port: 7, deadline: 5)
        let held = again.isHeld
        #expect(held)
        #expect(NanoTime.now().seconds(since: start) < 1)
    }

    @Test("a lock held by someone else is waited for until the deadline, then given up")
    func deadline() {
        let squatter = holdName(port: 9)
        defer { close(squatter) }
        let start = NanoTime.now()
        let lock = StartLock(port: 9, deadline: 0.3)
        let waited = NanoTime.now().seconds(since: start)
        let held = lock.isHeld
        #expect(!held)
        #expect(waited >= 0.3 && waited < 3, "waited \(waited) s")
    }

    @Test("a lock is taken as soon as its holder lets go")
    func released() {
        let holder = holdName(port: 13)
        // A thread of Dispatch's own: a task could wait for a concurrency thread while the
        // tests running in parallel hold them all, and the lock below blocks this one.
        let done = DispatchSemaphore(value: 0)
        DispatchQueue.global().asyncAfter(deadline: .now() + 0.15) {
            close(holder)
            done.signal()
        }
        let start = NanoTime.now()
        let lock = StartLock(port: 13, deadline: 5)
        let waited = NanoTime.now().seconds(since: start)
        let held = lock.isHeld
        #expect(held)
        #expect(waited >= 0.1 && waited < 3, "waited \(waited) s")
        done.wait()
    }

    @Test("each port has its own lock")
    func perPort() {
        let held = StartLock(port: 17, deadline: 5)
        let start = NanoTime.now()
        let other = StartLock(port: 19, deadline: 5)
        let both = held.isHeld && other.isHeld
        #expect(both)
        #expect(NanoTime.now().seconds(since: start) < 1)
    }
}
