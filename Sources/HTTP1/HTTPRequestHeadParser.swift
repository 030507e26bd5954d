/// Limits the head parser enforces; the caller bounds them (picohttpparser style).
public struct HTTPHeadLimits: Sendable, Hashable {
    /// Largest head, request line through the blank line, in bytes. Default 32 KiB.
    public var maxHeadBytes: Int
    /// Most header fields in one head. Default 100.
    public var maxHeaderCount: Int

    /// Creates limits; 32768 is the `limits.maxHeaderBytes` default of docs/configuration.md.
    public init(maxHeadBytes: Int = 32768, maxHeaderCount: Int = 100) {
        self.maxHeadBytes = maxHeadBytes
        self.maxHeaderCount = maxHeaderCount
    }
}

/// Outcome of one parse attempt over the bytes received so far.
public enum HeadParseResult: Sendable {
    /// A whole head; `consumed` bytes of the buffer belong to it (leading empty lines included).
    case complete(HTTPRequestHead, consumed: Int)
    /// More bytes are needed.
    case incomplete
    /// The request is refused; answer `error.status` and close.
    case invalid(HTTPParseError)
}

/// Incremental request-head parser: re-entered with the growing buffer, it never rescans
/// bytes whose line endings it already checked, so a byte-at-a-time client costs O(n).
public struct HTTPRequestHeadParser: Sendable {
    /// The limits in force.
    public var limits: HTTPHeadLimits
    /// Methods are short tokens; a longer run of token bytes before the first space is refused.
    static let maxMethodBytes = 64
    private var scanned = 0
    private var lineStart = 0
    private var start = 0

    /// Creates a parser for one head at a time.
    public init(limits: HTTPHeadLimits = HTTPHeadLimits()) { self.limits = limits }

    /// Forgets progress; call after a head completed and its bytes were consumed.
    public mutating func reset() { scanned = 0; lineStart = 0; start = 0 }

    /// Parses the head at the start of `buffer`. The buffer must hold the same prefix as on earlier calls.
    public mutating func parse(_ buffer: UnsafeRawBufferPointer) -> HeadParseResult {
        let bytes = buffer.bindMemory(to: UInt8.self)
        let count = bytes.count
        var i = scanned
        // RFC 9112 §2.2: ignore empty lines received before the request line.
        if i == start {
            while start + 1 < count, bytes[start] == .cr, bytes[start + 1] == .lf { start += 2 }
            if start < count, bytes[start] == .lf { return .invalid(.bareLF) }
            // The caller must keep these bytes until the head completes: bound them too.
            if start > limits.maxHeadBytes { return .invalid(.headTooLarge) }
            i = start
            lineStart = start
        }
        while i < count {
            let b = bytes[i]
            if b == .cr {
                guard i + 1 < count else { break }
                guard bytes[i + 1] == .lf else { return .invalid(.bareCR) }
                if i == lineStart && lineStart != start {
                    let end = i + 2
                    if end - start > limits.maxHeadBytes { return .invalid(.headTooLarge) }
                    scanned = end
                    return Self.parseHead(bytes, from: start, to: end, limits: limits)
                }
                if lineStart == start {
                    // The request line is complete: refuse a malformed one now rather than
                    // waiting for a blank line that an HTTP/0.9-style client never sends.
                    let line = UnsafeBufferPointer(rebasing: bytes[start..<(i + 2)])
                    if case .failure(let error) = Self.parseRequestLine(line) { return .invalid(error) }
                }
                i += 2
                lineStart = i
                continue
            }
            if b == .lf { return .invalid(.bareLF) }
            i = ByteScan.nextControlByte(bytes, from: i + 1)
        }
        scanned = i
        if lineStart == start && count - start > Self.maxMethodBytes {
            // Still in the request line: a method longer than any real one is malformed, not large.
            var j = start
            while j < start + Self.maxMethodBytes, ByteClass.isToken(bytes[j]) { j += 1 }
            if j == start + Self.maxMethodBytes { return .invalid(.invalidMethod) }
        }
        if count - start > limits.maxHeadBytes { return .invalid(.headTooLarge) }
        return .incomplete
    }

    /// Parses a head whose line endings are known to be CRLF; `end` is just past the blank line.
    private static func parseHead(
        _ bytes: UnsafeBufferPointer<UInt8>, from start: Int, to end: Int, limits: HTTPHeadLimits
    ) -> HeadParseResult {
        let storage = Array(bytes[start..<end])
        let checked = storage.withUnsafeBufferPointer { head in
            parseLines(head, limits: limits).flatMap { parts in HTTPHeadSemantics.check(head, parts).map { (parts, $0) }
            }
        }
        switch checked {
        case .failure(let error):
            return .invalid(error)
        case .success(let (parts, meaning)):
            // Made outside the storage's borrow: the storage and the fields move into the head
            // rather than being copied into it.
            let result = HTTPRequestHead(
                storage: storage, methodRange: parts.method, targetRange: parts.target,
                version: parts.version, fields: parts.fields, framing: meaning.framing,
                expectsContinue: meaning.expectsContinue, keepAlive: meaning.keepAlive, hostValue: meaning.host,
                upgradeValue: meaning.upgrade)
            return .complete(result, consumed: end)
        }
    }

    /// The syntactic pieces of a head.
    struct Parts {
        var method: Range<Int>
        var target: Range<Int>
        var version: HTTPVersion
        var fields: [HTTPFieldRange]
    }

    private static func parseLines(_ head: UnsafeBufferPointer<UInt8>, limits: HTTPHeadLimits) -> Result<
        Parts, HTTPParseError
    > {
        let requestLine: (method: Range<Int>, target: Range<Int>, version: HTTPVersion, end: Int)
        switch parseRequestLine(head) {
        case .success(let parsed): requestLine = parsed
        case .failure(let error): return .failure(error)
        }
        let (method, target, version) = (requestLine.method, requestLine.target, requestLine.version)
        var i = requestLine.end
        var fields: [HTTPFieldRange] = []
        fields.reserveCapacity(16)
        while !(head[i] == .cr) {
            if fields.count == limits.maxHeaderCount { return .failure(.tooManyHeaders) }
            if head[i] == .space || head[i] == .tab { return .failure(.obsFold) }
            let nameStart = i
            while ByteClass.isToken(head[i]) { i += 1 }
            let name = nameStart..<i
            if head[i] == .space || head[i] == .tab { return .failure(.whitespaceBeforeColon) }
            guard head[i] == .colon, !name.isEmpty else { return .failure(.invalidHeaderName) }
            i += 1
            while head[i] == .space || head[i] == .tab { i += 1 }
            let valueStart = i
            // Eight bytes a step to the CR (the head ends in CRLF CRLF), then back over trailing blanks.
            i = ByteScan.nextNonFieldValueByte(head, from: i)
            guard head[i] == .cr else { return .failure(.invalidHeaderValue) }
            var valueEnd = i
            while valueEnd > valueStart && (head[valueEnd - 1] == .space || head[valueEnd - 1] == .tab) {
                valueEnd -= 1
            }
            fields.append(HTTPFieldRange(name: name, value: valueStart..<valueEnd))
            i += 2
        }
        return .success(Parts(method: method, target: target, version: version, fields: fields))
    }

    /// `method SP request-target SP HTTP-version CRLF` at the start of `head`; `end` is past the CRLF.
    static func parseRequestLine(_ head: UnsafeBufferPointer<UInt8>) -> Result<
        (method: Range<Int>, target: Range<Int>, version: HTTPVersion, end: Int), HTTPParseError
    > {
        var i = 0
        while i < head.count, ByteClass.isToken(head[i]) { i += 1 }
        let method = 0..<i
        guard method.count <= maxMethodBytes, i < head.count else { return .failure(.invalidMethod) }
        guard !method.isEmpty, head[i] == .space else {
            return .failure(head[i] == .cr ? .invalidRequestLine : .invalidMethod)
        }
        i += 1
        let targetStart = i
        i = ByteScan.nextNonTargetByte(head, from: i)
        let target = targetStart..<i
        guard i < head.count, !target.isEmpty else { return .failure(.invalidRequestLine) }
        guard head[i] == .space else { return .failure(head[i] == .cr ? .invalidRequestLine : .invalidTarget) }
        i += 1
        // HTTP-version CRLF: exactly "HTTP/" DIGIT "." DIGIT
        guard i + 10 <= head.count, head[i + 8] == .cr,
            head[i] == 0x48, head[i + 1] == 0x54, head[i + 2] == 0x54, head[i + 3] == 0x50, head[i + 4] == 0x2F,
            head[i + 6] == 0x2E, isDigit(head[i + 5]), isDigit(head[i + 7])
        else { return .failure(.invalidVersion) }
        // RFC 9110 §6.2: a higher minor version of a major version we implement is processed as
        // the highest minor we conform to, so HTTP/1.2 … 1.9 are read as HTTP/1.1.
        let major = head[i + 5] - 0x30, minor = head[i + 7] - 0x30
        guard major == 1 else { return .failure(.unsupportedVersion) }
        let version = minor == 0 ? HTTPVersion.http10 : .http11
        return .success((method, target, version, i + 10))
    }

    @inline(__always)
    private static func isDigit(_ b: UInt8) -> Bool { b &- 0x30 < 10 }
}
