import EventLoop
/// Request IDs unique across the process: a random per-process prefix plus a per-loop counter.
public struct RequestIDGenerator {
    private let prefix: String
    private var counter: UInt64 = 0

    /// Creates a generator for loop `index`.
    public init(loopIndex: Int) {
        var random: UInt64 = 0
        withUnsafeMutableBytes(of: &random) { raw in
            var g = SystemRandomNumberGenerator()
            raw.storeBytes(of: g.next(), as: UInt64.self)
        }
        prefix = String(random & 0xFFFF_FFFF_FFFF, radix: 16) + "-" + String(loopIndex, radix: 16) + "-"
    }

    /// The next ID, e.g. `9f2c4e1a0b3d-0-1a`.
    public mutating func next() -> String {
        counter &+= 1
        return prefix + String(counter, radix: 16)
    }
}
