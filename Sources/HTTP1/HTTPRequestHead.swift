/// HTTP protocol version of a request (1.0 or 1.1 once parsed).
public struct HTTPVersion: Sendable, Hashable {
    /// Major digit.
    public var major: UInt8
    /// Minor digit.
    public var minor: UInt8
    /// HTTP/1.0.
    public static let http10 = HTTPVersion(major: 1, minor: 0)
    /// HTTP/1.1.
    public static let http11 = HTTPVersion(major: 1, minor: 1)
}

/// How the request body is delimited, decided once from the head.
public enum BodyFraming: Sendable, Hashable {
    /// No body at all.
    case none
    /// Exactly this many bytes.
    case length(Int)
    /// `Transfer-Encoding: chunked`.
    case chunked
    /// Until the peer closes (responses only; never chosen for a request).
    case untilClose
}

/// One header field as byte ranges into the head's storage.
public struct HTTPFieldRange: Sendable, Hashable {
    /// Range of the name.
    public var name: Range<Int>
    /// Range of the value, without surrounding whitespace.
    public var value: Range<Int>
}

/// A parsed request head: one copy of the head's bytes plus ranges into it.
///
/// Strings are made only when asked for, so the hot path allocates once per head.
public struct HTTPRequestHead: Sendable {
    /// The raw head bytes (request line through the final CRLF CRLF).
    public let storage: [UInt8]
    /// Range of the method.
    public let methodRange: Range<Int>
    /// Range of the request target.
    public let targetRange: Range<Int>
    /// Protocol version.
    public let version: HTTPVersion
    /// Header fields in arrival order.
    public let fields: [HTTPFieldRange]
    /// Body framing decided from Content-Length / Transfer-Encoding.
    public let framing: BodyFraming
    /// Whether the client asked for `100 Continue`.
    public let expectsContinue: Bool
    /// Whether the connection may be kept open after this exchange.
    public let keepAlive: Bool
    /// The range of the Host field's value, found while the head was checked (there is at most
    /// one: a second is refused), so no one searches the fields for it again.
    public let hostValue: Range<Int>?
    /// The range of the first Upgrade field's value, found while the head was checked, so a
    /// request without one (nearly all) is told apart without searching its fields.
    public let upgradeValue: Range<Int>?

    /// The method, e.g. `GET`: the usual ones as constant strings (nothing made or checked per
    /// request), any other from the head's bytes.
    public var method: String {
        switch methodRange.count {
        case 3:
            if methodIs("GET") { return "GET" }
            if methodIs("PUT") { return "PUT" }
        case 4:
            if methodIs("POST") { return "POST" }
            if methodIs("HEAD") { return "HEAD" }
        case 5 where methodIs("PATCH"): return "PATCH"
        case 6 where methodIs("DELETE"): return "DELETE"
        case 7 where methodIs("OPTIONS"): return "OPTIONS"
        default: break
        }
        return string(methodRange)
    }
    /// The request target as sent, e.g. `/accounts/me?x=1`.
    public var target: String { string(targetRange) }
    /// Number of header fields.
    public var fieldCount: Int { fields.count }

    /// The name of field `index`.
    public func name(at index: Int) -> String { string(fields[index].name) }
    /// The value of field `index`.
    public func value(at index: Int) -> String { string(fields[index].value) }

    /// The first value of `name` (ASCII case-insensitive), if present.
    public func first(_ name: String) -> String? {
        guard let index = firstIndex(of: name) else { return nil }
        return value(at: index)
    }

    /// Index of the first field called `name` (ASCII case-insensitive).
    public func firstIndex(of name: String) -> Int? {
        name.withUTF8Bytes { wanted in
            storage.withUnsafeBufferPointer { bytes in
                fields.firstIndex { asciiCaseInsensitiveEquals(bytes, $0.name, wanted) }
            }
        }
    }

    /// Calls `body` with the bytes of `range` (a field's name or value) in place.
    public func withBytes<R>(of range: Range<Int>, _ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        storage.withUnsafeBufferPointer { body(UnsafeBufferPointer(rebasing: $0[range])) }
    }

    /// Whether `method` is idempotent (RFC 9110 §9.2.2: GET, HEAD, OPTIONS, PUT, DELETE; TRACE is
    /// never forwarded): may be sent again when nothing came back.
    public static func isIdempotent(_ method: String) -> Bool {
        switch method {
        case "GET", "HEAD", "OPTIONS", "PUT", "DELETE": true
        default: false
        }
    }

    /// `isIdempotent(method)`, read from the bytes (no String).
    public var methodIsIdempotent: Bool {
        switch methodRange.count {
        case 3: methodIs("GET") || methodIs("PUT")
        case 4: methodIs("HEAD")
        case 6: methodIs("DELETE")
        case 7: methodIs("OPTIONS")
        default: false
        }
    }

    /// Whether the method bytes equal `method` exactly (methods are case-sensitive).
    public func methodIs(_ method: StaticString) -> Bool {
        guard method.utf8CodeUnitCount == methodRange.count else { return false }
        return storage.withUnsafeBufferPointer { bytes in
            var i = 0
            for b in bytes[methodRange] {
                if b != method.utf8Start[i] { return false }
                i += 1
            }
            return true
        }
    }

    /// Whether the method equals `uppercased` ignoring ASCII case (for methods that must be
    /// refused in every spelling).
    public func methodIsIgnoringCase(_ uppercased: StaticString) -> Bool {
        guard uppercased.utf8CodeUnitCount == methodRange.count else { return false }
        return storage.withUnsafeBufferPointer { bytes in
            var i = 0
            for b in bytes[methodRange] {
                if asciiLower(b) != asciiLower(uppercased.utf8Start[i]) { return false }
                i += 1
            }
            return true
        }
    }

    /// Whether the raw target equals `target` exactly.
    public func targetIs(_ target: StaticString) -> Bool {
        guard target.utf8CodeUnitCount == targetRange.count else { return false }
        return storage.withUnsafeBufferPointer { bytes in
            var i = 0
            for b in bytes[targetRange] {
                if b != target.utf8Start[i] { return false }
                i += 1
            }
            return true
        }
    }

    /// Whether the name of field `index` equals `lowercased` (given in lowercase), ignoring ASCII case.
    public func nameEquals(_ index: Int, _ lowercased: [UInt8]) -> Bool {
        lowercased.withUnsafeBufferPointer { nameEquals(index, $0) }
    }

    /// `nameEquals` for a constant name.
    public func nameEquals(_ index: Int, _ lowercased: StaticBytes) -> Bool { nameEquals(index, lowercased.buffer) }

    private func nameEquals(_ index: Int, _ lowercased: UnsafeBufferPointer<UInt8>) -> Bool {
        let range = fields[index].name
        guard range.count == lowercased.count else { return false }
        return storage.withUnsafeBufferPointer {
            asciiEqualsLowercased(UnsafeBufferPointer(rebasing: $0[range]), lowercased)
        }
    }

    /// Field `index` as written, `Name: value` (with the client's own spacing after the colon).
    public func line(at index: Int) -> String {
        string(fields[index].name.lowerBound..<fields[index].value.upperBound)
    }

    /// The text of `range` (a field's name or value, such as `hostValue`).
    public func string(_ range: Range<Int>) -> String {
        storage.withUnsafeBufferPointer { String(decoding: UnsafeBufferPointer(rebasing: $0[range]), as: UTF8.self) }
    }
}

/// ASCII case-insensitive comparison of `range` in `bytes` with `wanted`.
@inline(__always)
func asciiCaseInsensitiveEquals(
    _ bytes: UnsafeBufferPointer<UInt8>, _ range: Range<Int>, _ wanted: UnsafeBufferPointer<UInt8>
) -> Bool {
    guard range.count == wanted.count else { return false }
    var j = 0
    for i in range {
        if asciiLower(bytes[i]) != asciiLower(wanted[j]) { return false }
        j += 1
    }
    return true
}

/// Lowercases an ASCII letter and leaves every other byte alone.
@inlinable @inline(__always)
public func asciiLower(_ b: UInt8) -> UInt8 { b &- 0x41 < 26 ? b | 0x20 : b }

/// Whether `name` equals `lowercased` (given in lowercase), ignoring ASCII case: how every
/// module compares a field name with one it knows.
/// From eight bytes on, eight are compared at a time (the last word overlapping the one before).
@inlinable
public func asciiEqualsLowercased(_ name: UnsafeBufferPointer<UInt8>, _ lowercased: UnsafeBufferPointer<UInt8>) -> Bool
{
    let count = name.count
    guard count == lowercased.count else { return false }
    guard count >= 8, let a = name.baseAddress.map(UnsafeRawPointer.init),
        let b = lowercased.baseAddress.map(UnsafeRawPointer.init)
    else {
        for i in 0..<count where asciiLower(name[i]) != lowercased[i] { return false }
        return true
    }
    var i = 0
    while true {
        let at = min(i, count - 8)
        if asciiLowerWord(a.loadUnaligned(fromByteOffset: at, as: UInt64.self))
            != b.loadUnaligned(fromByteOffset: at, as: UInt64.self)
        {
            return false
        }
        i += 8
        if i >= count { return true }
    }
}

/// `asciiLower` of each of eight bytes at once: 0x20 is set in every byte from `A` to `Z` and
/// in no other (bytes of 0x80 and above included).
@inlinable @inline(__always)
public func asciiLowerWord(_ word: UInt64) -> UInt64 {
    let ones: UInt64 = 0x0101_0101_0101_0101
    let low = word & (0x7F * ones)
    // Each byte's top bit: set when its low seven bits are at least `A`, and when above `Z`.
    let atLeastA = low &+ (0x80 - 0x41) * ones
    let aboveZ = low &+ (0x80 - 0x5B) * ones
    let upper = atLeastA & ~aboveZ & ~word & (0x80 * ones)
    return word | (upper >> 2)
}
