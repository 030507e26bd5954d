import CLinux
import Glibc

/// Serialises the exclusivity probe and the SO_REUSEPORT binds of processes starting on one TCP
/// port at the same moment, so two cannot both pass the probe before either listens. The lock is
/// an abstract Unix socket (`@platform-proxy.start.<port>`): binding the name takes it, closing
/// the descriptor (or exiting) frees it. Nothing is created on disk, so there is no file another
/// user could plant a symbolic link at, and no stale lock after a crash.
///
/// Abstract names have no owner or permissions: any local user can bind this one first. So the
/// lock is only waited for until `deadline`; then the start goes on without it (logged as
/// `start_lock_busy`) and the probe alone decides, which still refuses a port anyone listens on.
/// All a squatter gains is a start delayed by the deadline; the only race left open is two of the
/// same user's processes binding within microseconds of each other (another user's process cannot
/// join our SO_REUSEPORT group: the kernel requires the same effective uid).
public struct StartLock: ~Copyable {
    private let fd: CInt
    /// How long a start waits for another one to finish binding (starts are milliseconds long).
    public static let defaultDeadline = 2.0

    /// The lock's abstract socket name for `port`, without the leading NUL.
    public static func name(port: UInt16) -> String { "platform-proxy.start.\(port)" }

    /// Takes the lock of `port`, waiting up to `deadline` seconds for whoever holds it; after
    /// that, or when no socket can be made, the lock is not held (see `isHeld`).
    public init(port: UInt16, deadline: Double = defaultDeadline) {
        let giveUp = NanoTime.now().adding(seconds: deadline)
        var fd = Self.bindName(Self.name(port: port))
        while fd == -EADDRINUSE, NanoTime.now() < giveUp {
            usleep(5_000)
            fd = Self.bindName(Self.name(port: port))
        }
        if fd == -EADDRINUSE {
            Log.emit(
                .warning, "start_lock_busy",
                [
                    "port": .int(Int(port)), "waitedSeconds": .double(deadline),
                    "message": .string(
                        "another process holds the start lock of this port; going on with the exclusivity probe alone"),
                ])
        }
        self.fd = max(fd, -1)
    }

    /// Whether this process holds the lock.
    public var isHeld: Bool { fd >= 0 }

    /// A socket bound to the abstract `name`, or minus the errno of the failure.
    private static func bindName(_ name: String) -> CInt {
        let fd = Glibc.socket(AF_UNIX, CInt(SOCK_STREAM.rawValue) | CInt(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return -errno }
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        // sun_path[0] stays NUL: the name lives in the abstract namespace, not the file system.
        let bytes = Array(name.utf8.prefix(MemoryLayout.size(ofValue: addr.sun_path) - 1))
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            raw.baseAddress!.advanced(by: 1).copyMemory(from: bytes, byteCount: bytes.count)
        }
        // The address length ends the name: trailing NULs would be part of it.
        let length = socklen_t(MemoryLayout<sa_family_t>.size + 1 + bytes.count)
        var result: CInt
        repeat {
            result = withUnsafePointer(to: &addr) { p in
                p.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, length) }
            }
        } while result == -1 && errno == EINTR
        guard result == 0 else {
            let code = errno
            closeDescriptor(fd)
            return -code
        }
        return fd
    }

    deinit {
        if fd >= 0 { closeDescriptor(fd) }
    }
}
