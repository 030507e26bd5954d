import HTTP1

/// A growable byte buffer with reader and writer indices, compacted instead of reallocated.
///
/// With a `BufferPool` the storage is taken from the pool on the first write and handed back by
/// `releaseIfEmpty`, so an idle keep-alive connection holds no buffer at all (an idle client
/// then costs only its objects, not two touched pages: `bench/idle_memory.py` measures it).
final class ByteBuffer {
    private(set) var storage: UnsafeMutableRawPointer?
    private(set) var capacity: Int
    private(set) var readerIndex = 0
    private(set) var writerIndex = 0
    /// Keeps the pool alive; it is used through `withPool`, which retains nothing (binding the
    /// optional retained and released it on every take and give, several times per request).
    private let pool: BufferPool?
    private let poolView: Unmanaged<BufferPool>?

    /// A buffer that owns `capacity` bytes from the start.
    init(capacity: Int) {
        self.capacity = max(capacity, 1)
        storage = .allocate(byteCount: self.capacity, alignment: 16)
        pool = nil
        poolView = nil
    }

    /// A buffer that takes its storage from `pool` when first written.
    init(pool: BufferPool) {
        self.pool = pool
        poolView = Unmanaged.passUnretained(pool)
        capacity = 0
    }

    @inline(__always)
    private func withPool<Result>(_ body: (BufferPool) -> Result) -> Result? {
        poolView?._withUnsafeGuaranteedRef(body)
    }

    /// Gives a pool-sized block back to the pool; frees any other.
    private func release(_ block: UnsafeMutableRawPointer, capacity: Int) {
        if withPool({ $0.size }) == capacity {
            withPool { $0.give(block) }
        } else {
            block.deallocate()
        }
    }

    deinit { dropStorage() }

    var readableBytes: Int { writerIndex - readerIndex }
    var isEmpty: Bool { writerIndex == readerIndex }

    /// The unread bytes.
    var readable: UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: storage.map { $0 + readerIndex }, count: readableBytes)
    }

    /// Free space after the written bytes, at least `minimum` bytes unless the buffer would exceed `limit`.
    func writableSpace(minimum: Int, limit: Int) -> UnsafeMutableRawBufferPointer {
        if capacity - writerIndex < minimum { makeRoom(minimum, limit: limit) }
        return UnsafeMutableRawBufferPointer(start: storage.map { $0 + writerIndex }, count: capacity - writerIndex)
    }

    func didWrite(_ count: Int) { writerIndex += count }

    /// Drops everything after the first `count` unread bytes.
    func truncate(keeping count: Int) {
        writerIndex = readerIndex + min(max(0, count), readableBytes)
        if readerIndex == writerIndex { readerIndex = 0; writerIndex = 0 }
    }

    func consume(_ count: Int) {
        readerIndex += count
        if readerIndex == writerIndex { readerIndex = 0; writerIndex = 0 }
    }

    func append(_ bytes: UnsafeRawBufferPointer) {
        guard bytes.count > 0 else { return }
        if capacity - writerIndex < bytes.count { makeRoom(bytes.count, limit: .max) }
        (storage! + writerIndex).copyMemory(from: bytes.baseAddress!, byteCount: bytes.count)
        writerIndex += bytes.count
    }

    func append(_ bytes: [UInt8]) { bytes.withUnsafeBytes { append($0) } }

    /// Makes room for `count` more bytes.
    func reserve(_ count: Int) {
        if capacity - writerIndex < count { makeRoom(count, limit: .max) }
    }

    func append(_ bytes: StaticBytes) { append(UnsafeRawBufferPointer(bytes.buffer)) }

    /// An empty pooled buffer gives its storage back (a grown one frees it); an unpooled one
    /// that grew for one large burst shrinks back to `size`.
    func releaseIfEmpty(unpooledSize size: Int) {
        guard isEmpty, storage != nil else { return }
        if pool != nil { return dropStorage() }
        guard capacity > size else { return }
        storage?.deallocate()
        storage = .allocate(byteCount: size, alignment: 16)
        capacity = size
    }

    private func dropStorage() {
        guard let storage else { return }
        release(storage, capacity: capacity)
        self.storage = nil
        capacity = 0
        readerIndex = 0
        writerIndex = 0
    }

    private func makeRoom(_ needed: Int, limit: Int) {
        guard let storage else {
            if let size = withPool({ $0.size }), needed <= size {
                storage = withPool { $0.take() }
                capacity = size
            } else {
                capacity = max(needed, withPool { $0.size } ?? 64)
                storage = .allocate(byteCount: capacity, alignment: 16)
            }
            return
        }
        let live = readableBytes
        if readerIndex > 0 {
            storage.copyMemory(from: storage + readerIndex, byteCount: live)
            readerIndex = 0
            writerIndex = live
        }
        guard capacity - writerIndex < needed else { return }
        var newCapacity = max(capacity, 64)
        while newCapacity - live < needed && newCapacity < limit { newCapacity *= 2 }
        newCapacity = min(max(newCapacity, capacity), max(limit, capacity))
        guard newCapacity > capacity else { return }
        let newStorage = UnsafeMutableRawPointer.allocate(byteCount: newCapacity, alignment: 16)
        newStorage.copyMemory(from: storage, byteCount: live)
        release(storage, capacity: capacity)
        self.storage = newStorage
        capacity = newCapacity
    }
}

/// One loop's free list of equal-sized buffer blocks: taking and giving back are an array
/// pop and push, so releasing a connection's buffers between requests costs no malloc.
/// Beyond `limit` blocks, given-back ones are freed (a burst's memory is not kept forever).
final class BufferPool {
    /// The size of every block.
    let size: Int
    /// Most free blocks kept.
    let limit: Int
    private var free: [UnsafeMutableRawPointer] = []

    init(size: Int, limit: Int) {
        self.size = size
        self.limit = limit
        free.reserveCapacity(limit)
    }

    deinit { for block in free { block.deallocate() } }

    /// Free blocks held now.
    var count: Int { free.count }

    func take() -> UnsafeMutableRawPointer {
        free.popLast() ?? .allocate(byteCount: size, alignment: 16)
    }

    func give(_ block: UnsafeMutableRawPointer) {
        if free.count < limit { free.append(block) } else { block.deallocate() }
    }
}

/// A response head (`HTTPExchange.startResponse`) or a chunk's size line written straight into a
/// connection's output buffer.
public struct ResponseHeadWriter: ByteSink {
    /// Unretained: a writer lives only inside `HTTPConnection.writeHead` and `writeBody`, which hold the buffer.
    /// `Unmanaged`, as an `unowned(unsafe)` reference is retained and released around each call.
    let output: Unmanaged<ByteBuffer>

    init(output: ByteBuffer) { self.output = Unmanaged.passUnretained(output) }

    public mutating func write(_ bytes: UnsafeRawBufferPointer) {
        output._withUnsafeGuaranteedRef { $0.append(bytes) }
    }

    public mutating func reserve(_ count: Int) { output._withUnsafeGuaranteedRef { $0.reserve(count) } }

    /// The bytes queued on the connection, this head's so far included.
    public var count: Int { output._withUnsafeGuaranteedRef { $0.readableBytes } }
}
