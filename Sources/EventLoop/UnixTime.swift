import Glibc

/// Wall-clock time in Unix seconds (token expiry is wall-clock).
public enum UnixTime {
    /// Now.
    public static func now() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}
