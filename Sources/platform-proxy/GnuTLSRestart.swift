import CLinux
import Glibc

/// libcurl4 loads GnuTLS (through librtmp and libldap), though it speaks TLS through OpenSSL and
/// the proxy allows only http and https. GnuTLS initialises itself in a library constructor,
/// before `main`, unless `GNUTLS_NO_IMPLICIT_INIT` is set: memory resident for the life of the
/// process, for nothing (`bench/idle_memory.py` measures it). So `serve` starts its own executable again, once, with the variable
/// set, keeping its PID, arguments and descriptors. A variable already set, to any value, is left
/// as it is (the image sets it); if the executable cannot be named or started again (or was
/// started through the dynamic loader by name), the proxy goes on as it started. Signals that come
/// while the second start loads (a few milliseconds) act as during the first: SIGTERM, SIGINT and
/// SIGHUP end the process until it blocks them for its signalfd, after the config is read.
///
/// The path comes from readlink, not `execv("/proc/self/exe")`: under valgrind the link names
/// valgrind's tool, and readlink is answered with the program (which then runs natively unless
/// valgrind traces children; the bench's profiles set the variable instead).
enum GnuTLSRestart {
    static let variable = "GNUTLS_NO_IMPLICIT_INIT"

    static func restartIfInitialised() {
        // AT_BASE is the dynamic loader's address when the kernel started this program through
        // it, and 0 when the loader itself was the program started (`ld.so platform-proxy serve`):
        // then /proc/self/exe names the loader, which the arguments alone would not restart.
        guard getenv(variable) == nil, cl_loader_base() != 0 else { return }
        var path = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let length = readlink("/proc/self/exe", &path, path.count - 1)
        guard length > 0, length < path.count - 1 else { return }
        setenv(variable, "1", 1)
        execv(path, CommandLine.unsafeArgv)
        unsetenv(variable)
    }
}
