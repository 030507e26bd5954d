import Glibc
import Testing

@testable import Analytics

@Suite("Analytics store bounds")
struct AnalyticsStoreBoundsTests {
    private func event(_ i: Int, valueBytes: Int, timestamp: Int64 = 1_700_000_000) -> NewEvent {
        NewEvent(subject: "s", key: "k\(i)", value: String(repeating: "v", count: valueBytes), timestamp: timestamp)
    }

    @Test("the byte cap drops the oldest values until the rest fit")
    func byteCap() throws {
        let dir = AnalyticsTestDirectory()
        let store = try AnalyticsStore(path: dir.database)
        try store.append((0..<100).map { event($0, valueBytes: 98) })  // 1 + 2…3 + 98 bytes each
        let dropped = try store.enforceByteCap(5_000)
        let left = try store.oldestBatch(limit: 1000)
        #expect(dropped == 100 - left.count)
        #expect(left.count >= 45 && left.count <= 50)
        #expect(left.last?.key == "k99")
        #expect(left.first.map { $0.key != "k0" } ?? false)
        #expect(try store.enforceByteCap(5_000) == 0)
    }

    @Test("the byte cap in batches drops the same oldest values as at once, a batch per call")
    func byteCapInBatches() throws {
        let dir = AnalyticsTestDirectory(), other = AnalyticsTestDirectory()
        let batched = try AnalyticsStore(path: dir.database), whole = try AnalyticsStore(path: other.database)
        for store in [batched, whole] { try store.append((0..<100).map { event($0, valueBytes: 98) }) }
        let expected = try whole.enforceByteCap(5_000)
        var calls: [Int] = []
        while true {
            let dropped = try batched.enforceByteCap(5_000, maxRows: 16)
            calls.append(dropped)
            if dropped < 16 { break }
        }
        #expect(calls.dropLast().allSatisfy { $0 == 16 } && calls.reduce(0, +) == expected)
        #expect(try batched.oldestBatch(limit: 1000).map(\.key) == whole.oldestBatch(limit: 1000).map(\.key))
        #expect(try batched.enforceByteCap(5_000, maxRows: 16) == 0)
    }

    @Test("the byte cap keeps its running total right across appends, uploads, pruning and caps")
    func byteCapRunningTotal() throws {
        let dir = AnalyticsTestDirectory()
        let store = try AnalyticsStore(path: dir.database)
        /// The stored values' bytes, counted row by row.
        func stored() throws -> Int {
            try store.oldestBatch(limit: 100_000).reduce(0) {
                $0 + $1.subject.utf8.count + $1.key.utf8.count + $1.value.utf8.count
            }
        }
        try store.append((0..<100).map { event($0, valueBytes: 98) })
        _ = try store.enforceByteCap(5_000)
        #expect(try stored() <= 5_000)
        #expect(try stored() > 5_000 - 102)
        try store.append((100..<150).map { event($0, valueBytes: 48) })
        let oldest = try store.oldestBatch(limit: 10).map(\.id)
        try store.delete(ids: oldest)
        _ = try store.enforceByteCap(4_000)
        #expect(try stored() <= 4_000)
        #expect(try stored() > 4_000 - 102)
        #expect(try store.oldestBatch(limit: 100_000).last?.key == "k149")
        try store.append((150..<160).map { event($0, valueBytes: 8, timestamp: 1_800_000_000) })
        _ = try store.prune(olderThan: 1_750_000_000)
        #expect(try store.enforceByteCap(4_000) == 0)
        #expect(try store.count() == 10)
        #expect(try store.enforceByteCap(0) == 10)
        #expect(try store.count() == 0)
    }

    @Test(
        "an upload batch stops at maxBytes but always holds one value",
        arguments: [(Int.max, 20), (1_000, 8), (50, 1), (1, 1)])
    func batchBytes(maxBytes: Int, expected: Int) throws {
        let dir = AnalyticsTestDirectory()
        let store = try AnalyticsStore(path: dir.database)
        try store.append((0..<20).map { event($0, valueBytes: 100) })
        #expect(try store.oldestBatch(limit: 1000, maxBytes: maxBytes).count == expected)
    }

    @Test("the file shrinks after pruning: incremental vacuum and a truncating checkpoint")
    func shrinks() throws {
        let dir = AnalyticsTestDirectory()
        let store = try AnalyticsStore(path: dir.database)
        try store.append((0..<4000).map { event($0, valueBytes: 1000) })
        try store.reclaimSpace()
        let full = fileBytes(dir.database) + fileBytes(dir.database + "-wal")
        _ = try store.prune(olderThan: .max)
        try store.reclaimSpace()
        let after = fileBytes(dir.database) + fileBytes(dir.database + "-wal")
        #expect(full > 4_000_000)
        #expect(after < full / 10)
    }

    private func fileBytes(_ path: String) -> Int {
        var info = stat()
        return stat(path, &info) == 0 ? Int(info.st_size) : 0
    }
}
