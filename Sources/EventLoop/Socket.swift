import CLinux
import Glibc

/// Where a listener binds.
public enum BindAddress: Sendable, Hashable, CustomStringConvertible {
    /// An IPv4 or IPv6 literal (or `localhost`) and a port; port 0 picks a free one.
    case tcp(host: String, port: UInt16)
    /// A Unix domain socket path.
    case unix(path: String)

    public var description: String {
        switch self {
        case .tcp(let host, let port): host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        case .unix(let path): "unix:\(path)"
        }
    }
}

/// Socket helpers over the syscall chokepoint.
public enum Socket {
    /// Creates a non-blocking listening socket; `reusePort` lets each loop bind its own (SO_REUSEPORT).
    /// With `listening: false` the socket is only bound (the exclusivity probe).
    public static func listen(
        _ address: BindAddress, reusePort: Bool, backlog: CInt = 4096,
        listening: Bool = true
    ) throws(IOError) -> CInt {
        switch address {
        case .tcp(let host, let port):
            let literal = host == "localhost" ? "127.0.0.1" : host
            let v6 = literal.contains(":")
            let fd = try syscall(where: "socket") {
                Glibc.socket(
                    v6 ? AF_INET6 : AF_INET,
                    CInt(SOCK_STREAM.rawValue) | CInt(SOCK_NONBLOCK.rawValue) | CInt(SOCK_CLOEXEC.rawValue), 0)
            }
            do throws(IOError) {
                _ = try syscall(where: "setsockopt(SO_REUSEADDR)") {
                    cl_set_int_option(fd, SOL_SOCKET, SO_REUSEADDR, 1)
                }
                if reusePort {
                    _ = try syscall(where: "setsockopt(SO_REUSEPORT)") {
                        cl_set_int_option(fd, SOL_SOCKET, SO_REUSEPORT, 1)
                    }
                }
                if v6 {
                    var addr = sockaddr_in6()
                    addr.sin6_family = sa_family_t(AF_INET6)
                    addr.sin6_port = port.bigEndian
                    guard inet_pton(AF_INET6, literal, &addr.sin6_addr) == 1 else {
                        throw IOError(errnoCode: EINVAL, call: "inet_pton(\(host))")
                    }
                    try bind(fd, &addr)
                } else {
                    var addr = sockaddr_in()
                    addr.sin_family = sa_family_t(AF_INET)
                    addr.sin_port = port.bigEndian
                    guard inet_pton(AF_INET, literal, &addr.sin_addr) == 1 else {
                        throw IOError(errnoCode: EINVAL, call: "inet_pton(\(host))")
                    }
                    try bind(fd, &addr)
                }
                if listening { _ = try syscall(where: "listen") { Glibc.listen(fd, backlog) } }
            } catch {
                closeDescriptor(fd)
                throw error
            }
            return fd
        case .unix(let path):
            let fd = try syscall(where: "socket") {
                Glibc.socket(
                    AF_UNIX, CInt(SOCK_STREAM.rawValue) | CInt(SOCK_NONBLOCK.rawValue) | CInt(SOCK_CLOEXEC.rawValue), 0)
            }
            do throws(IOError) {
                var addr = sockaddr_un()
                addr.sun_family = sa_family_t(AF_UNIX)
                let bytes = Array(path.utf8)
                guard bytes.count < MemoryLayout.size(ofValue: addr.sun_path) else {
                    throw IOError(errnoCode: ENAMETOOLONG, call: "bind(\(path))")
                }
                withUnsafeMutableBytes(of: &addr.sun_path) { raw in raw.copyBytes(from: bytes) }
                // `clearStaleUnixSocket` removed a stale socket from an earlier run; anything
                // else at the path makes bind fail, and is left alone.
                let oldMask = umask(0o117)  // the socket is created 0660: owner and group only
                defer { umask(oldMask) }
                try bind(fd, &addr)
                _ = try syscall(where: "listen") { Glibc.listen(fd, backlog) }
            } catch {
                closeDescriptor(fd)
                throw error
            }
            return fd
        }
    }

    /// Binds `fd` to a `sockaddr_in`, `sockaddr_in6` or `sockaddr_un`.
    private static func bind<Address>(_ fd: CInt, _ address: inout Address) throws(IOError) {
        _ = try withUnsafePointer(to: &address) { p throws(IOError) in
            try p.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa throws(IOError) in
                try syscall(where: "bind") { Glibc.bind(fd, sa, socklen_t(MemoryLayout<Address>.size)) }
            }
        }
    }

    /// The port a TCP listener is bound to (useful after binding port 0).
    public static func boundPort(_ fd: CInt) throws(IOError) -> UInt16 {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = try withUnsafeMutablePointer(to: &storage) { p throws(IOError) in
            try p.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa throws(IOError) in
                try syscall(where: "getsockname") { getsockname(fd, sa, &length) }
            }
        }
        return withUnsafePointer(to: &storage) { p in
            p.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin_port) }
        }
    }

    /// Accepts one connection: its fd and the peer's address as text, or nil when none is pending.
    public static func accept(_ listener: CInt) throws(IOError) -> (fd: CInt, peer: String)? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let result = try withUnsafeMutablePointer(to: &storage) { p throws(IOError) in
            try p.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa throws(IOError) in
                try syscall(blocking: false, where: "accept4") { cl_accept4(listener, sa, &length) }
            }
        }
        guard case .processed(let fd) = result else { return nil }
        return (fd, peerName(&storage))
    }

    /// Disables Nagle: responses are written whole, so delaying small writes only adds latency.
    public static func setNoDelay(_ fd: CInt) {
        _ = cl_set_int_option(fd, CInt(IPPROTO_TCP), TCP_NODELAY, 1)
    }

    private static func peerName(_ storage: inout sockaddr_storage) -> String {
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        switch CInt(storage.ss_family) {
        case AF_INET:
            return withUnsafePointer(to: &storage) { p in
                p.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { sin in
                    var addr = sin.pointee.sin_addr
                    inet_ntop(AF_INET, &addr, &buffer, socklen_t(buffer.count))
                    return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
                }
            }
        case AF_INET6:
            return withUnsafePointer(to: &storage) { p in
                p.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { sin in
                    var addr = sin.pointee.sin6_addr
                    inet_ntop(AF_INET6, &addr, &buffer, socklen_t(buffer.count))
                    return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
                }
            }
        default:
            return "unix"
        }
    }
}
