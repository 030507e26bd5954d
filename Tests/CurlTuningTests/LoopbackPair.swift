// CCurl as well as Glibc for the socket names: the socket header reaches both modules, and a clean
// build found SOCK_STREAM through Glibc alone missing in files compiled in one batch with another
// importing CCurl. Every file of this target that uses socket names imports both.
import CCurl
import CCurlTuning
import Glibc

/// A connected loopback TCP pair (connecting side, accepted side); with `noDelay`, the
/// connecting side has TCP_NODELAY, as libcurl sets it.
func loopbackTCPPair(noDelay: Bool = false) -> (CInt, CInt) {
    let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(listener) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            precondition(bind(listener, $0, length) == 0 && listen(listener, 1) == 0)
            precondition(getsockname(listener, $0, &length) == 0)
        }
    }
    let connecting = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { precondition(connect(connecting, $0, length) == 0) }
    }
    if noDelay {
        var one: CInt = 1
        precondition(
            setsockopt(connecting, CInt(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<CInt>.size)) == 0)
    }
    let accepted = accept(listener, nil, nil)
    precondition(accepted >= 0)
    return (connecting, accepted)
}

/// The overrides answer as with the tuning on (the start's `LibcurlTuning.turnOn`, without making
/// every client of the test process a tuned one). Never turned off again: with no pass and no mark
/// they are glibc's calls anyway, as for every other test in the process.
func tuningOn() { cc_set_tuning_enabled(1) }
