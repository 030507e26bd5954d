import Glibc
import HTTP1

/// Request header lines for an upstream, `Name: value` each, kept as one byte array with every
/// line NUL-terminated: the shape libcurl's header list wants, so a transfer hands them over
/// with one copy and no allocation per line (`EasyHandle.setHeaders`).
public struct HeaderLines: Sendable, Equatable {
    /// The lines, each followed by a 0 byte. The appends below are inlinable, so the callers in
    /// other modules (the proxy builds every upstream request's lines) get them specialized.
    @usableFromInline var storage: [UInt8] = []

    /// The lines, each followed by a 0 byte.
    @inlinable public var bytes: [UInt8] { storage }

    /// Number of lines: the 0 bytes, counted rather than kept, so it can never disagree with them.
    public var count: Int { bytes.count(where: { $0 == 0 }) }

    /// No lines.
    public init() {}

    /// Lines as `bytes` holds them, each already ending in a NUL.
    public init(bytes: UnsafeBufferPointer<UInt8>) { storage = Array(bytes) }

    /// Lines as `bytes` holds them, each already ending in a NUL.
    public init(bytes: [UInt8]) { storage = bytes }

    /// Whether there are no lines.
    public var isEmpty: Bool { bytes.isEmpty }

    /// `lines` in order.
    public init(_ lines: [String]) {
        for line in lines { append(line) }
    }

    /// Reserves room for about `byteCount` bytes of lines.
    @inlinable
    public mutating func reserveCapacity(_ byteCount: Int) { storage.reserveCapacity(byteCount) }

    /// Appends one whole line.
    @inlinable
    public mutating func append(_ line: String) {
        storage.append(contentsOf: line.utf8)
        endLine()
    }

    /// Appends `name: value` from raw bytes (the caller vouches they hold no CR, LF or NUL).
    @inlinable
    public mutating func append(name: some Collection<UInt8>, value: some Collection<UInt8>) {
        storage.append(contentsOf: name)
        storage.append(0x3A)
        storage.append(0x20)
        storage.append(contentsOf: value)
        endLine()
    }

    /// Appends raw bytes to the line being built; `endLine` finishes it.
    @inlinable
    public mutating func appendPart(_ part: some Collection<UInt8>) { storage.append(contentsOf: part) }

    /// Finishes the line being built by `appendPart`.
    @inlinable
    public mutating func endLine() { storage.append(0) }

    /// Appends every line of `other`.
    @inlinable
    public mutating func append(contentsOf other: HeaderLines) { storage.append(contentsOf: other.storage) }

    /// The lines as strings (tests, logs of rare paths).
    public var lines: [String] {
        bytes.split(separator: 0, omittingEmptySubsequences: false).dropLast().map {
            String(decoding: $0, as: UTF8.self)
        }
    }

    /// Whether a line's field name equals `lowercased` ignoring ASCII case (`Name:` or `Name;`).
    public func containsName(_ lowercased: String) -> Bool { containsNames(lowercased, lowercased).0 }

    /// Whether some line is named `first`, and whether some line is named `second` (both given
    /// lowercase; ASCII case ignored), in one pass over the lines. It runs for every forwarded
    /// request, so it walks the bytes directly.
    public func containsNames(_ first: String, _ second: String) -> (Bool, Bool) {
        var found = (false, false)
        first.withUTF8Bytes { a in
            second.withUTF8Bytes { b in
                bytes.withUnsafeBufferPointer { buffer in
                    var start = 0
                    while start < buffer.count {
                        // A line is what ends in a NUL (as for `forEachLine` and curl's list):
                        // bytes after the last NUL are no line.
                        guard let nul = memchr(buffer.baseAddress! + start, 0, buffer.count - start) else { break }
                        let lineEnd = buffer.baseAddress!.distance(to: nul.assumingMemoryBound(to: UInt8.self))
                        // Only a line that starts like one of the names is looked at further.
                        let initial = asciiLower(buffer[start])
                        if (a.first == initial && !found.0) || (b.first == initial && !found.1) {
                            var end = start
                            while end < lineEnd, buffer[end] != 0x3A, buffer[end] != 0x3B { end += 1 }
                            let name = UnsafeBufferPointer(rebasing: buffer[start..<end])
                            if !found.0, asciiEqualsLowercased(name, a) { found.0 = true }
                            if !found.1, asciiEqualsLowercased(name, b) { found.1 = true }
                        }
                        start = lineEnd + 1
                    }
                }
            }
        }
        return found
    }

    /// The lines whose field names (lowercased) are not in `names`.
    public func removing(_ names: Set<String>) -> HeaderLines {
        var result = HeaderLines()
        forEachLine { line in
            let name = String(decoding: Self.name(of: line).map(asciiLower), as: UTF8.self)
            guard !names.contains(name) else { return }
            result.storage.append(contentsOf: line)
            result.endLine()
        }
        return result
    }

    /// Calls `body` with each line, without its terminating 0.
    public func forEachLine(_ body: (ArraySlice<UInt8>) -> Void) {
        var start = 0
        for i in bytes.indices where bytes[i] == 0 {
            body(bytes[start..<i])
            start = i + 1
        }
    }

    /// Appends the lines to `head` as an HTTP/1.1 head carries them, each ending in CRLF, for a
    /// head written without libcurl (a tunnel's handshake): a `Name;` line, libcurl's form of a
    /// field sent with an empty value, goes as `Name:` (`Name;` is no field line to a server).
    public func appendHead(to head: inout [UInt8]) {
        forEachLine { line in
            let name = Self.name(of: line)
            if name.endIndex < line.endIndex, line[name.endIndex] == 0x3B, name.endIndex + 1 == line.endIndex {
                head.append(contentsOf: name)
                head.append(0x3A)
            } else {
                head.append(contentsOf: line)
            }
            head.append(0x0D)
            head.append(0x0A)
        }
    }

    /// The field name of `line`: up to `:` or `;` (curl's "send this header empty" form).
    private static func name(of line: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        line[line.startIndex..<(line.firstIndex { $0 == 0x3A || $0 == 0x3B } ?? line.endIndex)]
    }
}
