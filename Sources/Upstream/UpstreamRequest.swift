/// One request to an upstream, as the proxy decided it: exact method, URL and header lines.
public struct UpstreamRequest: Sendable {
    /// The method, e.g. `GET`.
    public var method: String
    /// The absolute URL.
    public var url: String
    /// Header lines `Name: value`, in order; Host, Content-Length and Transfer-Encoding are curl's.
    public var headers: [String]
    /// Body length when known; nil with a body means chunked.
    public var bodyLength: Int?
    /// Whether a body follows (streamed through the transfer's `RequestBody`).
    public var hasBody: Bool
    /// Seconds allowed until the response head, and for any stall after it.
    public var timeout: Double

    /// Creates a request.
    public init(method: String, url: String, headers: [String], hasBody: Bool, bodyLength: Int?, timeout: Double) {
        self.method = method
        self.url = url
        self.headers = headers
        self.hasBody = hasBody
        self.bodyLength = bodyLength
        self.timeout = timeout
    }
}

/// The final (non-1xx) response head from the upstream.
public struct UpstreamResponseHead: Sendable {
    /// Status code.
    public var status: Int
    /// Header fields as received, in order.
    public var headers: [(name: String, value: String)]

    /// The first value of `name` (ASCII case-insensitive).
    public func first(_ name: String) -> String? {
        headers.first { $0.name.utf8.count == name.utf8.count && $0.name.lowercased() == name.lowercased() }?.value
    }
}

/// Why a transfer failed; a struct over a private enum (DESIGN.md §8).
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
