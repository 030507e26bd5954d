/// Why a transfer failed; a struct over a private enum (docs/ARCHITECTURE.md §8).
public struct UpstreamError: Error, Sendable, Equatable, CustomStringConvertible {
    private enum Code: Sendable, Equatable { case unreachable, timeout, cancelled, failedMidResponse }
    private let code: Code
    /// What libcurl said, for the log (never contains request headers).
    public let detail: String

    private init(_ code: Code, _ detail: String) {
        self.code = code
        self.detail = detail
    }

    /// Connecting, TLS or reading the response failed.
    public static func unreachable(_ detail: String) -> Self { Self(.unreachable, detail) }
    /// No response head within the timeout, or a stall longer than it.
    public static func timeout(_ detail: String) -> Self { Self(.timeout, detail) }
    /// The proxy cancelled the transfer (the client went away).
    public static let cancelled = Self(.cancelled, "cancelled")

    /// Whether this is a timeout.
    public var isTimeout: Bool { code == .timeout }
    /// Whether the transfer was cancelled by the proxy.
    public var isCancelled: Bool { code == .cancelled }

    public var description: String { "\(code): \(detail)" }
}
