/// A string literal's bytes, read where the binary keeps them.
///
/// A `[UInt8]` constant is a heap object with a reference count, and every loop that appends or
/// compares it retains and releases it. Those are atomic writes to one cache line, so two loops on
/// two cores pass that line back and forth on every request (docs/performance.md, "Nothing shared
/// is written"; bench/shared-writes.sh). These bytes have no count to write.
package struct StaticBytes: RandomAccessCollection, @unchecked Sendable {
    private let start: UnsafePointer<UInt8>
    package let count: Int

    /// `literal` must have more than one Unicode scalar (a one-scalar literal is stored as its
    /// scalar, with no bytes to point at).
    package init(_ literal: StaticString) {
        precondition(literal.hasPointerRepresentation, "a one-scalar literal has no bytes to point at")
        start = literal.utf8Start
        count = literal.utf8CodeUnitCount
    }

    package var startIndex: Int { 0 }
    package var endIndex: Int { count }
    package subscript(position: Int) -> UInt8 { start[position] }
    package var buffer: UnsafeBufferPointer<UInt8> { UnsafeBufferPointer(start: start, count: count) }

    package func withContiguousStorageIfAvailable<R>(_ body: (UnsafeBufferPointer<UInt8>) throws -> R) rethrows -> R? {
        try body(buffer)
    }

    /// The bytes in order.
    package struct Iterator: IteratorProtocol {
        let bytes: StaticBytes
        var position: Int

        package mutating func next() -> UInt8? {
            guard position < bytes.count else { return nil }
            defer { position += 1 }
            return bytes.start[position]
        }
    }

    package func makeIterator() -> Iterator { Iterator(bytes: self, position: 0) }

    /// One `memcpy`: `Array.append(contentsOf:)` copies a sequence through this, and the default
    /// walks the iterator a byte at a time, paid per append of a field name (bench/cost-profile.sh).
    package __consuming func _copyContents(initializing destination: UnsafeMutableBufferPointer<UInt8>) -> (
        Iterator, Int
    ) {
        let n = Swift.min(count, destination.count)
        if n > 0, let target = destination.baseAddress { target.initialize(from: start, count: n) }
        return (Iterator(bytes: self, position: n), n)
    }
}
