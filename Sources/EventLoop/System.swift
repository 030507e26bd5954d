import CLinux
import Glibc

/// An I/O error naming the call that failed (swift-nio `IOError`).
public struct IOError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The errno value.
    public let errnoCode: CInt
    /// The call that failed, e.g. `bind`.
    public let call: String

    /// Creates an error for `call` failing with `errnoCode`.
    public init(errnoCode: CInt, call: String) {
        self.errnoCode = errnoCode
        self.call = call
    }

    public var description: String { "\(call) failed: \(String(cString: strerror(errnoCode))) (errno \(errnoCode))" }
}

/// Result of a non-blocking call.
public enum IOResult<T: Sendable>: Sendable {
    /// The call did its work.
    case processed(T)
    /// The call would have blocked (EAGAIN).
    case wouldBlock
}

/// The one syscall chokepoint (swift-nio `System.swift`): retries EINTR, maps EAGAIN to
/// `.wouldBlock` when `blocking` is false, traps on EBADF/EFAULT (those are our bugs), and
/// throws an `IOError` naming the call otherwise.
@inlinable @inline(__always)
public func syscall<T: FixedWidthInteger & Sendable>(
    blocking: Bool, where call: StaticString = #function, _ body: () -> T
) throws(IOError) -> IOResult<T> {
    while true {
        let result = body()
        guard result == -1 else { return .processed(result) }
        let err = cl_errno()
        switch err {
        case EINTR:
            continue
        case EAGAIN where !blocking:
            return .wouldBlock
        case EBADF, EFAULT:
            fatalError("\(call) failed with \(String(cString: strerror(err))): a descriptor bug in platform-proxy")
        default:
            throw IOError(errnoCode: err, call: "\(call)")
        }
    }
}

/// `syscall` for calls that are never non-blocking: returns the value or throws.
@inlinable @inline(__always)
public func syscall<T: FixedWidthInteger & Sendable>(where call: StaticString = #function, _ body: () -> T)
    throws(IOError) -> T
{
    switch try syscall(blocking: true, where: call, body) {
    case .processed(let value): return value
    case .wouldBlock: preconditionFailure("blocking call reported EAGAIN")
    }
}

/// Closes `fd`; close can only fail with EBADF (our bug) or EINTR/EIO, after which the fd is gone anyway.
public func closeDescriptor(_ fd: CInt) {
    let r = Glibc.close(fd)
    if r == -1 && cl_errno() == EBADF {
        fatalError("close(\(fd)) failed with EBADF: a descriptor bug in platform-proxy")
    }
}

/// Monotonic time in nanoseconds.
public struct NanoTime: Sendable, Comparable, Hashable {
    /// Nanoseconds since an arbitrary start.
    public var nanoseconds: Int64

    /// Creates a time from nanoseconds.
    public init(nanoseconds: Int64) { self.nanoseconds = nanoseconds }

    /// Now, from CLOCK_MONOTONIC.
    public static func now() -> NanoTime {
        var ns: Int64 = 0
        _ = cl_monotonic_now(&ns)
        return NanoTime(nanoseconds: ns)
    }

    /// This time plus `seconds`.
    /// This time plus `seconds`, saturating at about 292 years either way (a duration from a
    /// peer must never trap the process).
    public func adding(seconds: Double) -> NanoTime {
        let delta = seconds * 1_000_000_000
        let clamped = delta.isNaN ? 0 : min(max(delta, -9.0e18), 9.0e18)
        let (sum, overflow) = nanoseconds.addingReportingOverflow(Int64(clamped))
        return NanoTime(nanoseconds: overflow ? (clamped > 0 ? .max : .min) : sum)
    }

    /// Seconds from `earlier` to this time.
    public func seconds(since earlier: NanoTime) -> Double { Double(nanoseconds - earlier.nanoseconds) / 1e9 }

    public static func < (a: NanoTime, b: NanoTime) -> Bool { a.nanoseconds < b.nanoseconds }
}
