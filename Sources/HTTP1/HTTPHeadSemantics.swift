/// The framing and connection meaning of a head, with every smuggling defence (docs/architecture.md,
/// "Every smuggling defence is a named error"; nginx `ngx_http_request.c`, HAProxy `h1.c`):
/// ambiguity is refused, never fixed up.
public enum HTTPHeadSemantics {
    struct Meaning {
        var framing: BodyFraming
        var expectsContinue: Bool
        var keepAlive: Bool
        /// The value of the Host field (a request has at most one).
        var host: Range<Int>?
        /// The value of the first Upgrade field, if any.
        var upgrade: Range<Int>?
    }

    private static let host = StaticBytes("host")
    private static let contentLength = StaticBytes("content-length")
    private static let transferEncoding = StaticBytes("transfer-encoding")
    private static let connection = StaticBytes("connection")
    private static let expect = StaticBytes("expect")
    private static let upgrade = StaticBytes("upgrade")
    private static let chunked = StaticBytes("chunked")
    private static let close = StaticBytes("close")
    private static let keepAliveToken = StaticBytes("keep-alive")
    private static let continueToken = StaticBytes("100-continue")
    private static let connect = StaticBytes("CONNECT")
    private static let options = StaticBytes("OPTIONS")
    private static let http = StaticBytes("http://")
    private static let https = StaticBytes("https://")

    static func check(_ head: UnsafeBufferPointer<UInt8>, _ parts: HTTPRequestHeadParser.Parts) -> Result<
        Meaning, HTTPParseError
    > {
        if let error = checkTarget(head, parts) { return .failure(error) }
        var hostCount = 0
        var length: Int?
        var sawTransferEncoding = false
        var chunkedCount = 0
        var lastCodingIsChunked = false
        var otherCoding = false
        var closeAfter = parts.version == .http10
        var sawClose = false  // "close" wins over any keep-alive, in any order (RFC 9112 §9.3)
        var expectsContinue = false
        var hostValue: Range<Int>?
        var upgradeValue: Range<Int>?

        for field in parts.fields {
            let name = field.name
            switch name.count {
            case 4 where equals(head, name, host):
                hostCount += 1
                guard hostCount == 1 else { return .failure(.duplicateHost) }
                guard validHost(head, field.value) else { return .failure(.invalidHost) }
                hostValue = field.value
            case 14 where equals(head, name, contentLength):
                guard length == nil else { return .failure(.differingContentLengths) }
                switch parseContentLength(head, field.value) {
                case .success(let n): length = n
                case .failure(let e): return .failure(e)
                }
            case 17 where equals(head, name, transferEncoding):
                sawTransferEncoding = true
                var ok = true
                FieldList.forEachElement(head, field.value) { element in
                    guard !element.isEmpty else { ok = false; return }
                    if equals(head, element, chunked) {
                        chunkedCount += 1
                        lastCodingIsChunked = true
                    } else {
                        otherCoding = true
                        lastCodingIsChunked = false
                    }
                }
                guard ok else { return .failure(.transferEncodingNotChunked) }
            case 10 where equals(head, name, connection):
                FieldList.forEachElement(head, field.value) { element in
                    if equals(head, element, close) {
                        sawClose = true
                    } else if equals(head, element, keepAliveToken), parts.version == .http10 {
                        closeAfter = false
                    }
                }
            case 6 where equals(head, name, expect):
                guard equals(head, field.value, continueToken) else { return .failure(.unsupportedExpectation) }
                expectsContinue = parts.version == .http11
            case 7 where equals(head, name, upgrade):
                if upgradeValue == nil { upgradeValue = field.value }
            default:
                continue
            }
        }

        if hostCount == 0 && parts.version == .http11 { return .failure(.missingHost) }
        var framing = BodyFraming.none
        if sawTransferEncoding {
            guard parts.version == .http11 else { return .failure(.transferEncodingOnHTTP10) }
            guard length == nil else { return .failure(.contentLengthWithTransferEncoding) }
            guard chunkedCount <= 1 else { return .failure(.chunkedTwice) }
            guard lastCodingIsChunked else {
                return .failure(
                    chunkedCount == 0 && otherCoding ? .unsupportedTransferCoding : .transferEncodingNotChunked)
            }
            guard !otherCoding else { return .failure(.unsupportedTransferCoding) }
            framing = .chunked
        } else if let length, length > 0 {
            framing = .length(length)
        }
        if framing == .none { expectsContinue = false }
        return .success(
            Meaning(
                framing: framing, expectsContinue: expectsContinue, keepAlive: !closeAfter && !sawClose,
                host: hostValue,
                upgrade: upgradeValue))
    }

    /// origin-form for all methods, absolute-form (http/https) too, asterisk-form for OPTIONS only; no CONNECT.
    private static func checkTarget(_ head: UnsafeBufferPointer<UInt8>, _ parts: HTTPRequestHeadParser.Parts)
        -> HTTPParseError?
    {
        if equals(head, parts.method, connect, caseSensitive: true) { return .connectNotSupported }
        let first = head[parts.target.lowerBound]
        if first == UInt8(ascii: "/") { return nil }
        if parts.target.count == 1 && first == UInt8(ascii: "*") {
            return equals(head, parts.method, options, caseSensitive: true) ? nil : .invalidTarget
        }
        func hasScheme(_ scheme: StaticBytes) -> Bool {
            parts.target.count > scheme.count
                && equals(head, parts.target.lowerBound..<(parts.target.lowerBound + scheme.count), scheme)
        }
        if hasScheme(http) || hasScheme(https) { return nil }
        return .invalidTarget
    }

    /// `1*DIGIT`, nothing else: no sign, no list, no hex or octal prefix, at most 18 significant digits.
    private static func parseContentLength(_ head: UnsafeBufferPointer<UInt8>, _ range: Range<Int>) -> Result<
        Int, HTTPParseError
    > {
        guard !range.isEmpty else { return .failure(.invalidContentLength) }
        var value = 0
        var significant = 0
        for i in range {
            let d = head[i] &- 0x30
            guard d < 10 else {
                return .failure(head[i] == .comma ? .differingContentLengths : .invalidContentLength)
            }
            if value > 0 || d > 0 { significant += 1 }
            guard significant <= 18 else { return .failure(.contentLengthOverflow) }
            value = value * 10 + Int(d)
        }
        return .success(value)
    }

    /// `uri-host [":" port]`: no userinfo, path, comma or whitespace; a bracketed IP literal or a reg-name.
    /// Whether `text` is a Host value: `host`, `host:port` or `[v6]:port`, a port of 1–5 digits
    /// and nothing after it (the `Origin` check reads an origin's authority with it).
    public static func isValidHost(_ text: Substring) -> Bool {
        var text = text
        return text.withUTF8 { validHost($0, 0..<$0.count) }
    }

    private static func validHost(_ head: UnsafeBufferPointer<UInt8>, _ range: Range<Int>) -> Bool {
        guard !range.isEmpty else { return false }
        var i = range.lowerBound
        if head[i] == UInt8(ascii: "[") {
            while i < range.upperBound, head[i] != UInt8(ascii: "]") {
                guard ByteClass.isHost(head[i]) else { return false }
                i += 1
            }
            guard i < range.upperBound else { return false }
            i += 1
        } else {
            while i < range.upperBound, head[i] != .colon {
                guard ByteClass.isHost(head[i]), head[i] != UInt8(ascii: "["), head[i] != UInt8(ascii: "]") else {
                    return false
                }
                i += 1
            }
            guard i > range.lowerBound else { return false }
        }
        guard i < range.upperBound else { return true }
        guard head[i] == .colon else { return false }
        i += 1
        guard i < range.upperBound, range.upperBound - i <= 5 else { return false }
        while i < range.upperBound {
            guard head[i] &- 0x30 < 10 else { return false }
            i += 1
        }
        return true
    }

    private static func equals(
        _ head: UnsafeBufferPointer<UInt8>, _ range: Range<Int>, _ wanted: StaticBytes, caseSensitive: Bool = false
    ) -> Bool {
        guard range.count == wanted.count else { return false }
        var j = 0
        for i in range {
            let a = caseSensitive ? head[i] : asciiLower(head[i])
            if a != wanted[j] { return false }
            j += 1
        }
        return true
    }
}

/// Field values that are comma-separated lists (RFC 9110 §5.6.1): `Connection`,
/// `Transfer-Encoding`, a `Content-Length` sent as a list.
public enum FieldList {
    /// Calls `body` with the range of each element of the list value at `range` in `bytes`, in
    /// order, blanks trimmed; empty elements (`a,,b`, a trailing comma, an empty value) included.
    @inlinable
    public static func forEachElement(
        _ bytes: UnsafeBufferPointer<UInt8>, _ range: Range<Int>, _ body: (Range<Int>) -> Void
    ) {
        var start = range.lowerBound
        var i = start
        while i <= range.upperBound {
            if i == range.upperBound || bytes[i] == UInt8(ascii: ",") {
                var lo = start, hi = i
                while lo < hi, bytes[lo] == 0x20 || bytes[lo] == 0x09 { lo += 1 }
                while hi > lo, bytes[hi - 1] == 0x20 || bytes[hi - 1] == 0x09 { hi -= 1 }
                body(lo..<hi)
                start = i + 1
            }
            i += 1
        }
    }
}
