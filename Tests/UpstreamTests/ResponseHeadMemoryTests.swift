import Testing

@testable import Upstream

/// A head of `count` short fields, read as libcurl hands them over.
private func head(fields count: Int) -> UpstreamResponseHead {
    var head = UpstreamResponseHead(status: 0)
    _ = Array("HTTP/1.1 200 OK\r\n".utf8).withUnsafeBytes { head.read(line: $0) }
    for i in 0..<count { _ = Array("X-F\(i): v\r\n".utf8).withUnsafeBytes { head.read(line: $0) } }
    return head
}

@Suite("UpstreamResponseHead memory")
struct ResponseHeadMemoryTests {
    @Test("an ordinary head keeps its capacity for the next transfer")
    func ordinaryHeadKeepsCapacity() {
        var h = head(fields: 20)
        let storage = h.storage.capacity, fields = h.fields.capacity
        h.emptied()
        #expect(h.fields.isEmpty && h.storage.isEmpty && h.status == 0)
        #expect(h.storage.capacity == storage && h.fields.capacity == fields)
    }

    @Test("a head with many fields gives its memory back when emptied")
    func largeHeadGivesMemoryBack() {
        for count in [UpstreamResponseHead.keptFields + 1, UpstreamResponseHead.maxFields, 50_000] {
            var h = head(fields: count)
            #expect(h.fields.count == count)
            h.emptied()
            #expect(h.fields.isEmpty && h.storage.isEmpty)
            #expect(h.fields.capacity <= UpstreamResponseHead.keptFields, "\(count) fields")
            #expect(h.storage.capacity <= UpstreamResponseHead.keptBytes, "\(count) fields")
        }
    }

    @Test("a head with a large value gives its storage back when emptied")
    func largeValueGivesStorageBack() {
        var h = UpstreamResponseHead(status: 200)
        h.append(name: Array("X-Big".utf8), value: [UInt8](repeating: 0x61, count: 90_000))
        h.emptied()
        #expect(h.storage.capacity <= UpstreamResponseHead.keptBytes)
    }

    @Test("the field limit is above the request side's and an ordinary head's kept room")
    func fieldLimit() {
        #expect(UpstreamResponseHead.maxFields == 500)
        #expect(UpstreamResponseHead.keptFields < UpstreamResponseHead.maxFields)
    }
}
