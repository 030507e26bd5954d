import EventLoop

/// Request IDs unique across the process: a random per-process prefix, the loop's index and a
/// per-loop counter, e.g. `k3F9xZ-0-1a`, each part in base 62 (`0-9a-zA-Z`).
///
/// Sized to stay within Swift's small-string form (15 UTF-8 bytes, held inline: no allocation
/// and no reference count for the ID as it travels with the exchange) up to 62⁶ ≈ 5.7 × 10¹⁰
/// requests per loop, on fewer than 62 loops: a 6-character random part (35.7 bits), one for the
/// loop, at most six for the counter. Past that the ID is simply one character longer.
public struct RequestIDGenerator {
    private let prefix: [UInt8]
    /// The last counter value given out (internal: tests start it high).
    var counter: UInt64 = 0

    /// Creates a generator for loop `index`.
    public init(loopIndex: Int) {
        var random = SystemRandomNumberGenerator()
        let loop = UInt64(loopIndex), loopDigits = Self.digitCount(loop)
        prefix = [UInt8](unsafeUninitializedCapacity: 6 + 1 + loopDigits + 1) { buffer, count in
            for i in 0..<6 { buffer[i] = Self.digit(random.next(upperBound: 62)) }
            buffer[6] = UInt8(ascii: "-")
            Self.write(loop, digits: loopDigits, into: buffer, at: 7)
            buffer[7 + loopDigits] = UInt8(ascii: "-")
            count = buffer.count
        }
    }

    /// The base-62 digit of `value` (0…61): `0-9`, `a-z`, `A-Z`.
    @inline(__always)
    static func digit(_ value: UInt64) -> UInt8 {
        let v = UInt8(truncatingIfNeeded: value)
        return v < 10 ? 0x30 + v : v < 36 ? 0x57 + v : 0x1D + v
    }

    /// The number of base-62 digits `value` takes (at least one).
    private static func digitCount(_ value: UInt64) -> Int {
        var count = 1
        var rest = value / 62
        while rest > 0 { count += 1; rest /= 62 }
        return count
    }

    /// Writes `value` as `digits` base-62 digits into `buffer` from `start`.
    private static func write(
        _ value: UInt64, digits: Int, into buffer: UnsafeMutableBufferPointer<UInt8>, at start: Int
    ) {
        var rest = value
        for i in (start..<(start + digits)).reversed() {
            buffer[i] = digit(rest % 62)
            rest /= 62
        }
    }

    /// The next ID, written straight into the new string's storage: no concatenation, and no
    /// allocation while it fits a small string (malloc's share per request: `bench/cost-profile.sh`).
    public mutating func next() -> String {
        counter &+= 1
        let value = counter
        let digits = Self.digitCount(value)
        return String(unsafeUninitializedCapacity: prefix.count + digits) { buffer in
            _ = buffer.initialize(fromContentsOf: prefix)
            Self.write(value, digits: digits, into: buffer, at: prefix.count)
            return prefix.count + digits
        }
    }
}
