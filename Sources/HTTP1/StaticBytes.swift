/// A string literal's bytes, read where the binary keeps them.
///
/// A `[UInt8]` constant is a heap object with a reference count, and every loop that appends or
/// compares it retains and releases it. Those are atomic writes to one cache line, so two loops on
/// two cores pass that line back and forth on every request (docs/performance.md, "Nothing shared
/// is written"; bench/shared-writes.sh). These bytes have no count to write.
public struct StaticBytes: RandomAccessCollection, @unchecked Sendable {
    private let start: UnsafePointer<UInt8>
    public let count: Int

    /// `literal` must have more than one Unicode scalar (a one-scalar literal is stored as its
    /// scalar, with no bytes to point at).
    public init(_ literal: StaticString) {
        precondition(literal.hasPointerRepresentation, "a one-scalar literal has no bytes to point at")
        start = literal.utf8Start
        count = literal.utf8CodeUnitCount
    }

    public var startIndex: Int { 0 }
    public var endIndex: Int { count }
    public subscript(position: Int) -> UInt8 { start[position] }
    public var buffer: UnsafeBufferPointer<UInt8> { UnsafeBufferPointer(start: start, count: count) }

    public func withContiguousStorageIfAvailable<R>(_ body: (UnsafeBufferPointer<UInt8>) throws -> R) rethrows -> R? {
        try body(buffer)
    }

    /// The bytes in order.
    public struct Iterator: IteratorProtocol {
        let bytes: StaticBytes
        var position: Int

        public mutating func next() -> UInt8? {
            guard position < bytes.count else { return nil }
            defer { position += 1 }
            return bytes.start[position]
        }
    }

    public func makeIterator() -> Iterator { Iterator(bytes: self, position: 0) }

    /// One `memcpy`: `Array.append(contentsOf:)` copies a sequence through this, and the default
    /// walks the iterator a byte at a time, paid per append of a field name (bench/cost-profile.sh).
    public __consuming func _copyContents(initializing destination: UnsafeMutableBufferPointer<UInt8>) -> (
        Iterator, Int
    ) {
        let n = Swift.min(count, destination.count)
        if n > 0, let target = destination.baseAddress { target.initialize(from: start, count: n) }
        return (Iterator(bytes: self, position: n), n)
    }
}
