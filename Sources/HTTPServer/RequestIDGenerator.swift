import EventLoop
/// Request IDs unique across the process: a random per-process prefix plus a per-loop counter.
public struct RequestIDGenerator {
    private let prefix: [UInt8]
    private var counter: UInt64 = 0

    /// Creates a generator for loop `index`.
    public init(loopIndex: Int) {
        var random: UInt64 = 0
        withUnsafeMutableBytes(of: &random) { raw in
            var g = SystemRandomNumberGenerator()
            raw.storeBytes(of: g.next(), as: UInt64.self)
        }
        prefix = Array((String(random & 0xFFFF_FFFF_FFFF, radix: 16) + "-" + String(loopIndex, radix: 16) + "-").utf8)
    }

    /// The next ID, e.g. `9f2c4e1a0b3d-0-1a`.
    /// Written straight into the new string's storage: one allocation, no concatenation (one
    /// per request, docs/ARCHITECTURE.md §13).
    public mutating func next() -> String {
        counter &+= 1
        let value = counter
        let digits = max(1, (64 - value.leadingZeroBitCount + 3) / 4)
        return String(unsafeUninitializedCapacity: prefix.count + digits) { buffer in
            _ = buffer.initialize(fromContentsOf: prefix)
            var rest = value
            for i in (prefix.count..<(prefix.count + digits)).reversed() {
                let digit = UInt8(truncatingIfNeeded: rest & 0xF)
                buffer[i] = digit < 10 ? 0x30 + digit : 0x57 + digit
                rest >>= 4
            }
            return prefix.count + digits
        }
    }
}
