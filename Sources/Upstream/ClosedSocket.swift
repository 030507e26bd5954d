import Glibc

/// A socket whose peer is gone, which a pooled connection's descriptor is made to name once the
/// loop saw the connection turn readable while parked, or found bytes on it as it was parked
/// (`CurlSocket.spoil`, `UpstreamClient.connectionSpoiled`).
///
/// libcurl 7.88's liveness check of a pooled connection (`cf_socket_conn_is_alive`, and OpenSSL's
/// one-byte peek over TLS) calls a socket alive when a peek at it finds a byte, or fails: so a
/// connection the upstream reset, or one holding bytes no request asked for, is reused, and the
/// next request either fails on it (a 502 for a request with a body, which is not sent twice) or
/// reads those bytes as its response, which may be another client's. Only an EOF makes it drop the
/// connection. `dup2` puts this socket in the descriptor's place, closing the connection's own
/// socket: every check and read of the number then finds an EOF, libcurl drops the connection,
/// and its close callback closes the descriptor as usual.
enum ClosedSocket {
    /// One end of a socket pair whose other end was closed; shared by every replaced descriptor.
    static let descriptor: CInt = {
        var pair: [CInt] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pair) == 0 else {
            return -1
        }
        close(pair[1])
        return pair[0]
    }()

    /// Makes `fd` name the closed socket; false if it could not (it keeps its own socket).
    static func replace(_ fd: CInt) -> Bool {
        guard descriptor >= 0, dup2(descriptor, fd) == fd else { return false }
        // Nothing is started after the loops run, but no descriptor of the proxy's outlives it.
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        return true
    }
}
