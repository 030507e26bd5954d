/// Where a head is serialised: a `[UInt8]`, or a connection's output buffer written in place
/// (`HTTPServer.ResponseHeadWriter`), so a response head is not built in an array and copied.
///
/// An `Array.append(contentsOf:)` checks uniqueness and capacity and goes through the generic
/// copy each time, even for a two-byte CRLF, and a response head is a few dozen appends
/// (bench/cost-profile.sh counts them). A sink's `write` is one capacity check and one `memcpy`.
/// The helpers are `@inlinable`, so a caller that knows its sink gets them specialised.
public protocol ByteSink {
    /// Appends `bytes`.
    mutating func write(_ bytes: UnsafeRawBufferPointer)
    /// Makes room for `count` more bytes, so the writes that follow do not grow the storage.
    mutating func reserve(_ count: Int)
    /// The bytes the sink holds (a caller marks where its own part began and ended).
    var count: Int { get }
}

extension ByteSink {
    @inlinable
    public mutating func write(_ bytes: UnsafeBufferPointer<UInt8>) { write(UnsafeRawBufferPointer(bytes)) }

    @inlinable
    public mutating func write(_ bytes: StaticBytes) { write(UnsafeRawBufferPointer(bytes.buffer)) }

    /// A string's UTF-8 bytes.
    @inlinable
    public mutating func write(_ string: String) {
        string.withUTF8Bytes { write(UnsafeRawBufferPointer($0)) }
    }

    @inlinable
    public mutating func write(byte: UInt8) {
        withUnsafeBytes(of: byte) { write($0) }
    }

    /// `value`'s decimal digits (negative values are written as 0).
    @inlinable
    public mutating func writeDecimal(_ value: Int) { writeDigits(value, radix: 10) }

    /// `value`'s lowercase hexadecimal digits (negative values are written as 0): a chunk's size.
    @inlinable
    public mutating func writeHexadecimal(_ value: Int) { writeDigits(value, radix: 16) }

    /// `value`'s digits in `radix` (2...16), from a stack buffer: no String, no array. Always
    /// inlined, so the radix is a constant: a division by a variable is a `div` per digit.
    @inlinable @inline(__always)
    mutating func writeDigits(_ value: Int, radix: UInt) {
        // 64 bytes: any Int in base 2.
        var digits: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &digits) { buffer in
            var rest = UInt(max(0, value)), start = buffer.count
            repeat {
                start -= 1
                let digit = UInt8(rest % radix)
                buffer[start] = digit < 10 ? UInt8(ascii: "0") + digit : UInt8(ascii: "a") + digit - 10
                rest /= radix
            } while rest > 0
            write(UnsafeRawBufferPointer(rebasing: buffer[start...]))
        }
    }

    /// `name: value\r\n` (the caller vouches the value holds no CR, LF or NUL).
    @inlinable
    public mutating func writeField(_ name: String, _ value: String) {
        write(name)
        write(HTTPFieldSyntax.colonSpace)
        write(value)
        write(HTTPFieldSyntax.crlf)
    }
}

/// The separators a head is written with.
public enum HTTPFieldSyntax {
    public static let colonSpace = StaticBytes(": ")
    public static let crlf = StaticBytes("\r\n")
}

extension Array: ByteSink where Element == UInt8 {
    @inlinable
    public mutating func write(_ bytes: UnsafeRawBufferPointer) { append(contentsOf: bytes) }

    @inlinable
    public mutating func reserve(_ count: Int) { reserveCapacity(self.count + count) }
}

/// A sink over memory the caller provides (a stack buffer): writes past its end are dropped and
/// remembered, never made, so the caller can build again where there is room.
public struct BoundedWriter: ByteSink {
    @usableFromInline let buffer: UnsafeMutableBufferPointer<UInt8>
    @usableFromInline var used = 0
    @usableFromInline var dropped = false
    /// The bytes written.
    @inlinable
    public var count: Int { used }
    /// A write did not fit: what was written is incomplete.
    @inlinable
    public var overflowed: Bool { dropped }

    @inlinable
    public init(_ buffer: UnsafeMutableBufferPointer<UInt8>) { self.buffer = buffer }

    /// What was written.
    @inlinable
    public var written: UnsafeBufferPointer<UInt8> { UnsafeBufferPointer(rebasing: buffer[..<used]) }

    @inlinable
    public mutating func write(_ bytes: UnsafeRawBufferPointer) {
        guard bytes.count <= buffer.count - used else {
            dropped = true
            return
        }
        guard let source = bytes.baseAddress, let base = buffer.baseAddress else { return }
        UnsafeMutableRawPointer(base + used).copyMemory(from: source, byteCount: bytes.count)
        used += bytes.count
    }

    @inlinable
    public mutating func reserve(_ count: Int) {}
}
