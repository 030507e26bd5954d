import Testing

@testable import HTTPServer

extension ByteBuffer {
    fileprivate var bytes: [UInt8] { Array(readable) }
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
            let chunk = (0..<n).map { _ in
                counter &+= 1; return counter
            }
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

    @Test("an unpooled buffer that grew shrinks back once empty, and not while busy")
    func shrinkIfIdle() {
        let buffer = ByteBuffer(capacity: 16)
        buffer.append(Array(repeating: 9, count: 200))
        let grown = buffer.capacity
        #expect(grown >= 200)
        buffer.releaseIfEmpty(unpooledSize: 16)
        #expect(buffer.capacity == grown)
        #expect(buffer.readableBytes == 200)

        buffer.consume(200)
        buffer.releaseIfEmpty(unpooledSize: 16)
        #expect(buffer.capacity == 16)
        buffer.append(Array(1...5))
        #expect(buffer.bytes == Array(1...5))
    }

    @Test("releasing never grows an unpooled buffer")
    func releaseNeverGrows() {
        let buffer = ByteBuffer(capacity: 16)
        buffer.releaseIfEmpty(unpooledSize: 64)
        #expect(buffer.capacity == 16)
    }

    @Test("a pooled buffer holds no storage until written and gives it back when empty")
    func pooledBufferLendsStorage() {
        let pool = BufferPool(size: 64, limit: 2)
        let buffer = ByteBuffer(pool: pool)
        #expect(buffer.capacity == 0 && buffer.storage == nil && buffer.readable.isEmpty)
        buffer.append(Array(1...10))
        #expect(buffer.capacity == 64 && pool.count == 0)
        buffer.releaseIfEmpty(unpooledSize: 64)
        #expect(buffer.capacity == 64, "not empty: kept")
        buffer.consume(10)
        buffer.releaseIfEmpty(unpooledSize: 64)
        #expect(buffer.storage == nil && buffer.capacity == 0 && pool.count == 1)
        let space = buffer.writableSpace(minimum: 16, limit: 1024)
        #expect(space.count == 64 && pool.count == 0, "taken back from the pool")
    }

    @Test("a pooled buffer that grows frees the grown block; the pool keeps at most its limit")
    func pooledGrowthAndLimit() {
        let pool = BufferPool(size: 32, limit: 1)
        let a = ByteBuffer(pool: pool), b = ByteBuffer(pool: pool)
        a.append(Array(repeating: 1, count: 8))
        b.append(Array(repeating: 2, count: 8))
        a.append(Array(repeating: 3, count: 100))
        #expect(a.capacity >= 108 && pool.count == 1, "the 32-byte block went back when a grew")
        #expect(a.bytes == Array(repeating: 1, count: 8) + Array(repeating: 3, count: 100))
        a.consume(108)
        a.releaseIfEmpty(unpooledSize: 32)
        #expect(pool.count == 1, "a grown block is freed, not pooled")
        b.consume(8)
        b.releaseIfEmpty(unpooledSize: 32)
        #expect(pool.count == 1, "beyond the limit blocks are freed")
    }

    @Test("appending nothing changes nothing")
    func appendEmpty() {
        let buffer = ByteBuffer(capacity: 4)
        buffer.append([])
        #expect(buffer.isEmpty)
        #expect(buffer.capacity == 4)
    }
}
