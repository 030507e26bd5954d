/// A growable byte buffer with reader and writer indices, compacted instead of reallocated.
final class ByteBuffer {
    private(set) var storage: UnsafeMutableRawPointer
    private(set) var capacity: Int
    private(set) var readerIndex = 0
    private(set) var writerIndex = 0

    init(capacity: Int) {
        self.capacity = max(capacity, 1)
        storage = .allocate(byteCount: self.capacity, alignment: 16)
    }

    deinit { storage.deallocate() }

    var readableBytes: Int { writerIndex - readerIndex }
    var isEmpty: Bool { writerIndex == readerIndex }

    /// The unread bytes.
    var readable: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: storage + readerIndex, count: readableBytes) }

    /// Free space after the written bytes, at least `minimum` bytes unless the buffer would exceed `limit`.
    func writableSpace(minimum: Int, limit: Int) -> UnsafeMutableRawBufferPointer {
        if capacity - writerIndex < minimum { makeRoom(minimum, limit: limit) }
        return UnsafeMutableRawBufferPointer(start: storage + writerIndex, count: capacity - writerIndex)
    }

    func didWrite(_ count: Int) { writerIndex += count }

    func consume(_ count: Int) {
        readerIndex += count
        if readerIndex == writerIndex { readerIndex = 0; writerIndex = 0 }
    }

    func append(_ bytes: UnsafeRawBufferPointer) {
        guard bytes.count > 0 else { return }
        if capacity - writerIndex < bytes.count { makeRoom(bytes.count, limit: .max) }
        (storage + writerIndex).copyMemory(from: bytes.baseAddress!, byteCount: bytes.count)
        writerIndex += bytes.count
    }

    func append(_ bytes: [UInt8]) { bytes.withUnsafeBytes { append($0) } }

    /// Shrinks a buffer that grew for one large burst back to `capacity` once it is empty.
    func shrinkIfIdle(to size: Int) {
        guard isEmpty, capacity > size else { return }
        storage.deallocate()
        storage = .allocate(byteCount: size, alignment: 16)
        capacity = size
    }

    private func makeRoom(_ needed: Int, limit: Int) {
        let live = readableBytes
        if readerIndex > 0 {
            (storage).copyMemory(from: storage + readerIndex, byteCount: live)
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
        storage.deallocate()
        storage = newStorage
        capacity = newCapacity
    }
}
