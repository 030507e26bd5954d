import JSON
import Testing

@testable import Proxy

private func record(_ path: String, status: Int = 200) -> RequestRecord {
    var record = RequestRecord()
    record.path = Substring(path)
    record.status = status
    return record
}

@Suite("RequestRing")
struct RequestRingTests {
    @Test("an empty ring holds nothing")
    func empty() {
        #expect(RequestRing().snapshot().isEmpty)
    }

    @Test("records come back oldest first, numbered in order")
    func order() {
        let ring = RequestRing()
        for path in ["/a", "/b", "/c"] { ring.record { $0 = record(path) } }
        let held = ring.snapshot()
        #expect(held.map(\.path) == ["/a", "/b", "/c"])
        #expect(held.map(\.sequence) == [0, 1, 2])
    }

    @Test("past its capacity the oldest records are overwritten, the size stays fixed")
    func wraps() {
        let ring = RequestRing()
        let total = RequestRing.capacity + 5
        for i in 0..<total { ring.record { $0 = record("/\(i)") } }
        let held = ring.snapshot()
        #expect(held.count == RequestRing.capacity)
        #expect(held.first?.path == "/5")
        #expect(held.last?.path == Substring("/\(total - 1)"))
        #expect(held.first?.sequence == 5)
    }

    @Test("a record's JSON names its loop and never holds more than its fields")
    func json() throws {
        var one = record("/api/items", status: 502)
        one.route = "api"
        one.method = "GET"
        one.credentials = .stripped
        one.hops = 2
        let ring = RequestRing()
        ring.record { $0 = one }
        let value = try #require(ring.snapshot().first).json(loop: 3)
        #expect(value["id"]?.stringValue == "3-0")
        #expect(value["path"]?.stringValue == "/api/items")
        #expect(value["credentials"]?.stringValue == "not_a_credential_host")
        #expect(value["redirects"]?.int64Value == 2)
    }
}

@Suite("RequestFeedCursor")
struct RequestFeedCursorTests {
    private func item(_ loop: Int, _ sequence: UInt64, time: Double) -> (loop: Int, record: RequestRecord) {
        var record = RequestRecord()
        record.sequence = sequence
        record.time = time
        return (loop, record)
    }

    @Test("a new stream gets everything held, oldest first across loops; then only what is newer on each loop")
    func freshPerLoop() {
        var cursor = RequestFeedCursor()
        let first = cursor.fresh([item(0, 0, time: 3), item(1, 0, time: 1), item(0, 1, time: 4)])
        #expect(first.map { [$0.loop, Int($0.record.sequence)] } == [[1, 0], [0, 0], [0, 1]])
        // The rings gathered again: the same records plus one new on loop 1 and one on a loop that was empty.
        let again = cursor.fresh([
            item(0, 0, time: 3), item(0, 1, time: 4), item(1, 0, time: 1), item(1, 1, time: 6),
            item(2, 0, time: 5),
        ])
        #expect(again.map { [$0.loop, Int($0.record.sequence)] } == [[2, 0], [1, 1]])
        #expect(cursor.fresh([item(0, 1, time: 4), item(1, 1, time: 6), item(2, 0, time: 5)]).isEmpty)
    }

    @Test("records that wrapped out of a ring are not missed: sequence numbers only grow")
    func afterWrap() {
        var cursor = RequestFeedCursor()
        _ = cursor.fresh([item(0, 10, time: 1)])
        let later = cursor.fresh([item(0, 300, time: 9), item(0, 301, time: 10)])
        #expect(later.map(\.record.sequence) == [300, 301])
    }
}
