import CCurl
import CCurlTuning
import EventLoop
import Glibc
import Upstream

// CurlTuning: the process-wide overrides of four C library calls, answered for libcurl from what
// the event loops know. The executable defines them and exports them (Package.swift
// `interposedCalls`), so libcurl's calls bind here rather than to glibc:
//
// - `poll(3)`: libcurl's zero-timeout readiness checks of a pooled connection (before reusing it,
//   after sending a bodiless request) and of a socket it watches are answered from the loop's
//   knowledge when it has some (`QuietSockets`);
// - `recv(2)`: libcurl's one-byte liveness peek at a pooled TLS connection is answered the same
//   way, and OpenSSL's 5-byte record-header reads take what the socket holds in one call
//   (`ReadAhead`);
// - `send(2)`: libcurl's sends to one socket during one pass leave together (`SendBatch`), and a
//   send that fails on a reset while the upstream's answer is unread is told it went out, so
//   libcurl reads the answer;
// - `clock_gettime(2)`: libcurl's monotonic clock reads during a pass after the first cost no
//   vDSO call (`PassClock`).
//
// They rely on libcurl's internals, so they are used only with a libcurl they were verified with:
// 7.88.1 built with OpenSSL (Debian 12's libcurl4). With any other, or with the environment
// variable PLATFORM_PROXY_CURL_TUNING=off, the tuning stays off: each override is glibc's call and
// nothing else (one load and a branch), no client gets a `CurlPass`, and Upstream runs libcurl
// plainly. `LibcurlTuning.start` decides at start and logs one `curl_tuning` line saying which.
// bench/cost-profile.sh measures what the tuning saves (run it with the variable set to compare).

/// Whether the libc overrides serve libcurl in this process, decided once at start.
public enum LibcurlTuning {
    /// The environment variable that turns the tuning off (`off`); `on`, or unset, uses it when
    /// the running libcurl is one it was verified with.
    public static let environmentVariable = "PLATFORM_PROXY_CURL_TUNING"

    /// The libcurl versions (`LIBCURL_VERSION_NUM`) the overrides were verified with.
    public static let verifiedVersions: [UInt32] = [0x07_58_01]

    /// What `start` decided.
    public enum Decision: Equatable, Sendable {
        /// The tuning serves libcurl `libcurl` (its version and TLS library).
        case on(libcurl: String)
        /// Plain glibc, and why.
        case off(reason: String)
        /// The environment variable has a value other than `on` or `off`.
        case invalidSwitch(String)
    }

    /// The decision for the variable's value `switchValue` (nil: unset) and the running libcurl
    /// (`version` as `LIBCURL_VERSION_NUM`, `versionText` as printed, its TLS library `tls`).
    public static func decide(switchValue: String?, version: UInt32, versionText: String, tls: String?) -> Decision {
        let running = "libcurl \(versionText) (\(tls ?? "no TLS"))"
        switch switchValue {
        case "off":
            return .off(reason: "\(environmentVariable)=off")
        case nil, "", "on":
            break
        case let other?:
            return .invalidSwitch(other)
        }
        guard verifiedVersions.contains(version) else {
            return .off(reason: "\(running) is not a version the tuning was verified with (7.88.1)")
        }
        guard let tls, tls.hasPrefix("OpenSSL/") else {
            return .off(reason: "\(running) does not speak TLS through OpenSSL, as the verified one does")
        }
        return .on(libcurl: running)
    }

    /// Decides from the environment and the running libcurl, turns the tuning on if so, and logs
    /// one line saying which. Call once at start, before any loop thread and any `UpstreamClient`.
    public static func start() -> Decision {
        let info = curl_version_info(CURLVERSION_TENTH)  // CURLVERSION_NOW in 7.88.1's header
        let version = info.map { UInt32($0.pointee.version_num) } ?? 0
        let versionText = info.flatMap { $0.pointee.version }.map { String(cString: $0) } ?? "unknown"
        let tls = info.flatMap { $0.pointee.ssl_version }.map { String(cString: $0) }
        let decision = decide(
            switchValue: getenv(environmentVariable).map { String(cString: $0) },
            version: version, versionText: versionText, tls: tls)
        switch decision {
        case .on(let libcurl):
            turnOn()
            Log.emit(.info, "curl_tuning", ["state": .string("on"), "libcurl": .string(libcurl)])
        case .off(let reason):
            Log.emit(.info, "curl_tuning", ["state": .string("off"), "reason": .string(reason)])
        case .invalidSwitch:
            break
        }
        return decision
    }

    /// The overrides answer from what the loops know, and every new client gets a `CurlPass`.
    public static func turnOn() {
        cc_set_tuning_enabled(1)
        UpstreamClient.installedTuning = CurlPass.self
    }

    /// Whether the overrides serve libcurl (else each is glibc's call).
    @inline(__always)
    static var isOn: Bool { cc_tuning_enabled() != 0 }
}

/// `poll(3)` for the whole process: with the tuning on, zero-timeout checks of sockets whose
/// readiness the loop knows are answered from that (`QuietSockets`); every other call is glibc's.
@_cdecl("poll")
public func pollAnsweringKnownSockets(_ fds: UnsafeMutablePointer<pollfd>?, _ count: nfds_t, _ timeout: CInt) -> CInt {
    guard LibcurlTuning.isOn else { return cc_kernel_poll(fds, count, timeout) }
    return QuietSockets.poll(fds, count, timeout)
}

/// `recv(2)` for the whole process: with the tuning on, a one-byte peek at a socket whose
/// readiness the loop knows is answered from that, and short reads of a watched socket read ahead
/// (`QuietSockets.receive`); every other call is glibc's `recvfrom`, which `recv` is.
@_cdecl("recv")
public func receiveAnsweringKnownSockets(
    _ fd: CInt, _ buffer: UnsafeMutableRawPointer?, _ length: Int,
    _ flags: CInt
) -> Int {
    guard LibcurlTuning.isOn else { return recvfrom(fd, buffer, length, flags, nil, nil) }
    return QuietSockets.receive(fd, buffer, length, flags)
}

/// `send(2)` for the whole process: with the tuning on, libcurl's sends during a pass of a loop's
/// client are coalesced per socket (`SendBatch`); every other call is glibc's `sendto`, which
/// `send` is.
@_cdecl("send")
public func sendCoalescingPasses(_ fd: CInt, _ buffer: UnsafeRawPointer?, _ length: Int, _ flags: CInt) -> Int {
    guard LibcurlTuning.isOn else { return sendto(fd, buffer, length, flags, nil, 0) }
    return SendBatch.send(fd, buffer, length, flags)
}

/// `clock_gettime(2)` for the whole process: with the tuning on, libcurl's reads of the monotonic
/// clock during a pass of a loop's client are answered from the pass's last real read
/// (`PassClock`); every other call is glibc's.
@_cdecl("clock_gettime")
public func clockReadingPasses(_ clock: clockid_t, _ time: UnsafeMutablePointer<timespec>?) -> CInt {
    guard LibcurlTuning.isOn else { return cc_glibc_clock_gettime(clock, time) }
    return PassClock.read(clock, time)
}
