/// Drops a value whose key was accepted less than `intervalSeconds` before (or
/// after) it, as the client library's buffer interval does.
///
/// Per key it keeps the newest accepted timestamp. Memory is bounded: once the
/// table has doubled since the last sweep, keys whose newest value is an
/// interval or more older than the newest value seen are forgotten (they can
/// no longer drop anything current), and past `maxKeys` the oldest quarter
/// goes too. Forgetting a key can only let a duplicate through, never drop a
/// distinct value.
public struct DedupBuffer: Sendable {
    private var newest: [String: Int64] = [:]
    private var highWater = Int64.min
    private var sweepAt: Int
    private let interval: Double
    private let maxKeys: Int
    private static let minimumSweep = 1024

    /// A buffer that drops repeats within `intervalSeconds` (0 or less: drops nothing), keeping at most `maxKeys` keys.
    public init(intervalSeconds: Double, maxKeys: Int = 100_000) {
        interval = intervalSeconds.isNaN ? 0 : intervalSeconds
        self.maxKeys = max(1, maxKeys)
        sweepAt = min(DedupBuffer.minimumSweep, self.maxKeys)
    }

    /// Number of keys remembered.
    public var count: Int { newest.count }

    /// True (and remembered) when `key` at `timestamp` (Unix seconds) is kept; false when it is a repeat.
    public mutating func admit(key: String, timestamp: Int64) -> Bool {
        guard interval > 0 else { return true }
        highWater = max(highWater, timestamp)
        if let last = newest[key] {
            if abs(Double(timestamp) - Double(last)) < interval { return false }
            newest[key] = max(last, timestamp)
        } else {
            if newest.count >= sweepAt { sweep() }
            newest[key] = timestamp
        }
        return true
    }

    private mutating func sweep() {
        let horizon = Double(highWater) - interval
        newest = newest.filter { Double($0.value) > horizon }
        if newest.count >= maxKeys {
            let keep = maxKeys - max(1, maxKeys / 4)
            let survivors = newest.sorted { $0.value > $1.value }.prefix(keep)
            newest = Dictionary(uniqueKeysWithValues: survivors.map { ($0.key, $0.value) })
        }
        // Doubling makes each sweep's cost paid for by the insertions since the last one.
        sweepAt = min(maxKeys, max(DedupBuffer.minimumSweep, newest.count * 2))
    }
}
