import Testing
@testable import EventLoop

private extension ByteBuffer {
    var bytes: [UInt8] { Array(readable) }
}

@Suite("ByteBuffer")
struct ByteBufferTests {
    @Test("append then consume yields the bytes in order")
    func appendConsume() {
        let buffer = ByteBuffer(capacity: 16)
        #expect(buffer.isEmpty)
        buffer.append(Array(1...10))
        #expect(buffer.readableBytes == 10)
        #expect(buffer.bytes == Array(1...10))
        buffer.consume(4)
        #expect(buffer.bytes == Array(5...10))
        #expect(buffer.readerIndex == 4)
    }

    @Test("consuming everything rewinds both indices")
    func consumeAllRewinds() {
        let buffer = ByteBuffer(capacity: 16)
        buffer.append(Array(1...10))
        buffer.consume(10)
        #expect(buffer.isEmpty)
        #expect(buffer.readerIndex == 0)
        #expect(buffer.writerIndex == 0)
    }

    @Test("compaction moves the unread bytes to the front instead of growing")
    func compactionPreservesBytes() {
        let buffer = ByteBuffer(capacity: 16)
        buffer.append(Array(1...10))
        buffer.consume(6)
        buffer.append(Array(11...20))
        #expect(buffer.capacity == 16)
        #expect(buffer.readerIndex == 0)
        #expect(buffer.bytes == Array(7...20))
    }

    @Test("growth keeps every unread byte")
    func growthPreservesBytes() {
        let buffer = ByteBuffer(capacity: 16)
        buffer.append(Array(0..<12))
        buffer.consume(5)
        let big = (0..<300).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        buffer.append(big)
        #expect(buffer.capacity >= 307)
        #expect(buffer.bytes == Array(5..<12) + big)
    }

    @Test("many small appends and consumes keep FIFO order")
    func interleavedAppendConsume() {
        var rng = SeededGenerator(seed: 42)
        let buffer = ByteBuffer(capacity: 8)
        var model: [UInt8] = []
        var counter: UInt8 = 0
        for _ in 0..<2_000 {
            let n = Int.random(in: 0...20, using: &rng)
            let chunk = (0..<n).map { _ in counter &+= 1; return counter }
            buffer.append(chunk)
            model += chunk
            let c = Int.random(in: 0...model.count, using: &rng)
            buffer.consume(c)
            model.removeFirst(c)
            #expect(buffer.bytes == model)
        }
    }

    @Test("writableSpace gives at least the minimum when the limit allows")
    func writableSpaceMinimum() {
        let buffer = ByteBuffer(capacity: 16)
        buffer.append(Array(repeating: 1, count: 12))
        let space = buffer.writableSpace(minimum: 64, limit: 1_024)
        #expect(space.count >= 64)
        #expect(buffer.bytes == Array(repeating: 1, count: 12))
        space.storeBytes(of: 0xAB, toByteOffset: 0, as: UInt8.self)
        buffer.didWrite(1)
        #expect(buffer.bytes == Array(repeating: 1, count: 12) + [0xAB])
    }

    @Test("writableSpace never grows the buffer past the limit")
    func writableSpaceHonoursLimit() {
        let buffer = ByteBuffer(capacity: 16)
        buffer.append(Array(repeating: 2, count: 16))
        let space = buffer.writableSpace(minimum: 64, limit: 32)
        #expect(buffer.capacity == 32)
        #expect(space.count == 16)
        #expect(buffer.bytes == Array(repeating: 2, count: 16))
    }

    @Test("writableSpace with a limit below capacity neither grows nor shrinks")
    func writableSpaceLimitBelowCapacity() {
        let buffer = ByteBuffer(capacity: 16)
        buffer.append(Array(repeating: 3, count: 10))
        let space = buffer.writableSpace(minimum: 64, limit: 8)
        #expect(buffer.capacity == 16)
        #expect(space.count == 6)
    }

    @Test("writableSpace compacts before it grows")
    func writableSpaceCompacts() {
        let buffer = ByteBuffer(capacity: 16)
        buffer.append(Array(1...16))
        buffer.consume(12)
        let space = buffer.writableSpace(minimum: 8, limit: 16)
        #expect(buffer.capacity == 16)
        #expect(space.count == 12)
        #expect(buffer.bytes == Array(13...16))
    }

    @Test("shrinkIfIdle returns a grown, empty buffer to its size and leaves a busy one alone")
    func shrinkIfIdle() {
        let buffer = ByteBuffer(capacity: 16)
        buffer.append(Array(repeating: 9, count: 200))
        let grown = buffer.capacity
        #expect(grown >= 200)
        buffer.shrinkIfIdle(to: 16)
        #expect(buffer.capacity == grown)
        #expect(buffer.readableBytes == 200)

        buffer.consume(200)
        buffer.shrinkIfIdle(to: 16)
        #expect(buffer.capacity == 16)
        buffer.append(Array(1...5))
        #expect(buffer.bytes == Array(1...5))
    }

    @Test("shrinkIfIdle never grows a buffer")
    func shrinkIfIdleNeverGrows() {
        let buffer = ByteBuffer(capacity: 16)
        buffer.shrinkIfIdle(to: 64)
        #expect(buffer.capacity == 16)
    }

    @Test("appending nothing changes nothing")
    func appendEmpty() {
        let buffer = ByteBuffer(capacity: 4)
        buffer.append([])
        #expect(buffer.isEmpty)
        #expect(buffer.capacity == 4)
    }
}
