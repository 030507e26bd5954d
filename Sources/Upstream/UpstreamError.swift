/// Why a transfer failed; a struct over a private enum, so cases can be added without breaking callers.
public struct UpstreamError: Error, Sendable, Equatable, CustomStringConvertible {
    private enum Code: Sendable, Equatable {
        case unreachable, staleConnection, timeout, cancelled, failedMidResponse, loop
    }
    private let code: Code
    /// What libcurl said, for the log (never contains request headers).
    public let detail: String

    private init(_ code: Code, _ detail: String) {
        self.code = code
        self.detail = detail
    }

    /// Connecting, TLS or reading the response failed.
    public static func unreachable(_ detail: String) -> Self { Self(.unreachable, detail) }
    /// A pooled connection libcurl reused failed before any byte of the response came back: the
    /// upstream closed it while idle (its keep-alive timeout) as the request went out. libcurl
    /// sends an HTTP/1.1 request again on a new connection itself in that case, whatever its
    /// method, not one multiplexed on an HTTP/2 connection; a request with `sendsOnce` is stopped
    /// at that second send and ends as this. Nothing came back; whether the upstream saw the
    /// request is unknown, so only an idempotent one may be sent again (RFC 9110 §9.2.2).
    public static func staleConnection(_ detail: String) -> Self { Self(.staleConnection, detail) }
    /// No response head within the timeout, or a stall longer than it.
    public static func timeout(_ detail: String) -> Self { Self(.timeout, detail) }
    /// The hop would connect to one of the proxy's own listeners (`OwnListeners`); nothing was sent.
    public static func loop(_ detail: String) -> Self { Self(.loop, detail) }
    /// The proxy cancelled the transfer (the client went away).
    public static let cancelled = Self(.cancelled, "cancelled")

    /// Whether this is a timeout.
    public var isTimeout: Bool { code == .timeout }
    /// Whether a reused connection failed before any response byte (`staleConnection`).
    public var isStaleConnection: Bool { code == .staleConnection }
    /// Whether the hop would have come back to the proxy (`loop`).
    public var isLoop: Bool { code == .loop }
    /// Whether the transfer was cancelled by the proxy.
    public var isCancelled: Bool { code == .cancelled }

    public var description: String { "\(code): \(detail)" }
}
