import CLinux
import Glibc

extension Socket {
    /// Fails with `ListenError.inUse` when anything listens on a fixed TCP port already. The
    /// loops' own listeners share the port through SO_REUSEPORT, which would also let a second
    /// process (same user) bind it and take half the traffic with its own credentials; a bind
    /// without SO_REUSEPORT conflicts with every listener, so it tells the two cases apart.
    /// Starts racing each other are serialised by `StartLock` around the probe and the binds.
    public static func probeExclusive(host: String, port: UInt16) throws(ListenError) {
        let address = BindAddress.tcp(host: host, port: port)
        do {
            let fd = try listen(address, reusePort: false, listening: false)
            closeDescriptor(fd)
        } catch {
            throw ListenError.cannotBind(address, error)
        }
    }

    /// Makes room for a `unix:` listener: nothing there, or a stale socket (connecting is
    /// refused: nobody accepts on it) which is removed. A live socket is "in use"; a file,
    /// directory or link is never touched.
    public static func clearStaleUnixSocket(_ path: String) throws(ListenError) {
        let address = BindAddress.unix(path: path)
        var info = stat()
        do {
            _ = try syscall(where: "lstat") { lstat(path, &info) }
        } catch {
            if error.errnoCode == ENOENT { return }
            throw ListenError.cannotBind(address, error)
        }
        guard info.st_mode & S_IFMT == S_IFSOCK else {
            let kind: String
            switch info.st_mode & S_IFMT {
            case S_IFREG: kind = "a regular file"
            case S_IFDIR: kind = "a directory"
            case S_IFLNK: kind = "a symbolic link"
            default: kind = "a file that is not a socket"
            }
            throw ListenError.notASocket(address, kind: kind)
        }
        do {
            try connectUnix(path)
        } catch {
            guard error.errnoCode == ECONNREFUSED else { throw ListenError.cannotBind(address, error) }
            unlink(path)
            return
        }
        throw ListenError.inUse(address)
    }

    /// Connects a blocking socket to `path` and closes it; throws what connect said.
    private static func connectUnix(_ path: String) throws(IOError) {
        let fd = try syscall(where: "socket") {
            Glibc.socket(AF_UNIX, CInt(SOCK_STREAM.rawValue) | CInt(SOCK_CLOEXEC.rawValue), 0)
        }
        defer { closeDescriptor(fd) }
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: addr.sun_path) else {
            throw IOError(errnoCode: ENAMETOOLONG, call: "connect")
        }
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in raw.copyBytes(from: bytes) }
        _ = try withUnsafePointer(to: &addr) { p throws(IOError) in
            try p.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa throws(IOError) in
                try syscall(where: "connect") { Glibc.connect(fd, sa, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
        }
    }
}
