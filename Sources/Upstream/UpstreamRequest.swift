/// One request to an upstream, as the proxy decided it: exact method, URL and header lines.
public struct UpstreamRequest: Sendable {
    /// The method, e.g. `GET`.
    public var method: String
    /// The absolute URL.
    public var url: String
    /// Header lines `Name: value`, in order; Host, Content-Length and Transfer-Encoding are curl's.
    public var headers: HeaderLines
    /// More lines sent after `headers` (the proxy's injected credentials), kept apart so neither
    /// list is copied to join them.
    public var extraHeaders = HeaderLines()
    /// Body length when known; nil with a body means chunked.
    public var bodyLength: Int?
    /// Whether a body follows (streamed through the transfer's `RequestBody`).
    public var hasBody: Bool
    /// Seconds allowed until the response head, and for any stall after it.
    public var timeout: Double

    /// Creates a request.
    public init(method: String, url: String, headers: HeaderLines, hasBody: Bool, bodyLength: Int?, timeout: Double) {
        self.method = method
        self.url = url
        self.headers = headers
        self.hasBody = hasBody
        self.bodyLength = bodyLength
        self.timeout = timeout
    }

    /// Creates a request from header lines given as strings.
    public init(method: String, url: String, headers: [String], hasBody: Bool, bodyLength: Int?, timeout: Double) {
        self.init(method: method, url: url, headers: HeaderLines(headers), hasBody: hasBody, bodyLength: bodyLength, timeout: timeout)
    }
}

/// The final (non-1xx) response head from the upstream: the field bytes as received and their
/// ranges, so relaying a response makes no String per field.
public struct UpstreamResponseHead: Sendable {
    /// Status code.
    public var status: Int
    /// Names and values back to back; `fields` holds their ranges.
    public private(set) var storage: [UInt8] = []
    /// Each field's name and value range in `storage`, in arrival order.
    public private(set) var fields: [(name: Range<Int>, value: Range<Int>)] = []

    /// An empty head with `status`.
    public init(status: Int) { self.status = status }

    /// A head with these fields (tests, fetch results).
    public init(status: Int, headers: [(name: String, value: String)]) {
        self.status = status
        for (name, value) in headers { append(name: Array(name.utf8)[...], value: Array(value.utf8)[...]) }
    }

    /// Adds a field.
    public mutating func append(name: some Collection<UInt8>, value: some Collection<UInt8>) {
        let nameStart = storage.count
        storage.append(contentsOf: name)
        let valueStart = storage.count
        storage.append(contentsOf: value)
        fields.append((nameStart..<valueStart, valueStart..<storage.count))
    }

    /// Forgets every field (a new head begins), keeping the capacity (reserving some at first).
    mutating func reset(status: Int) {
        if storage.capacity == 0 {
            storage.reserveCapacity(512)
            fields.reserveCapacity(16)
        }
        self.status = status
        storage.removeAll(keepingCapacity: true)
        fields.removeAll(keepingCapacity: true)
    }

    /// Header fields as strings, in order.
    public var headers: [(name: String, value: String)] {
        fields.map { (string($0.name), string($0.value)) }
    }

    /// Whether field `index` is called `lowercased` (given in lowercase), ignoring ASCII case.
    public func nameEquals(_ index: Int, _ lowercased: [UInt8]) -> Bool {
        let range = fields[index].name
        guard range.count == lowercased.count else { return false }
        var j = 0
        for i in range {
            if asciiLower(storage[i]) != lowercased[j] { return false }
            j += 1
        }
        return true
    }

    /// The first value of `name` (ASCII case-insensitive).
    public func first(_ name: String) -> String? {
        let wanted = Array(name.utf8).map(asciiLower)
        return fields.indices.first { nameEquals($0, wanted) }.map { string(fields[$0].value) }
    }

    /// The first `Content-Length` as a number, when it is one and no `Transfer-Encoding` overrides
    /// it (RFC 9112 §6.3: curl then decodes the chunks and the length means nothing).
    public var contentLength: Int? {
        guard !fields.indices.contains(where: { nameEquals($0, Self.transferEncodingName) }),
              let index = fields.indices.first(where: { nameEquals($0, Self.contentLengthName) }) else { return nil }
        let digits = storage[fields[index].value]
        guard !digits.isEmpty, digits.count <= 18, digits.allSatisfy({ $0 &- 0x30 < 10 }) else { return nil }
        return digits.reduce(0) { $0 * 10 + Int($1 &- 0x30) }
    }

    private static let contentLengthName = Array("content-length".utf8)
    private static let transferEncodingName = Array("transfer-encoding".utf8)

    private func string(_ range: Range<Int>) -> String { String(decoding: storage[range], as: UTF8.self) }
}

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
