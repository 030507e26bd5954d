/// Writes UTF-8 into the buffer `String(unsafeUninitializedCapacity:initializingUTF8With:)` hands
/// over: a string built from parts with one allocation and one copy per part. `+=` on a String
/// costs a few hundred instructions per part, and the upstream URL is built for every forwarded
/// request (docs/ARCHITECTURE.md §13).
@usableFromInline
package struct UTF8Writer {
    @usableFromInline let buffer: UnsafeMutableBufferPointer<UInt8>
    /// Bytes written so far.
    @usableFromInline package private(set) var count = 0

    @inlinable
    package init(_ buffer: UnsafeMutableBufferPointer<UInt8>) { self.buffer = buffer }

    /// Appends `text`'s UTF-8; traps if the capacity given to `String.build` is exceeded.
    @inlinable
    package mutating func put<Text: StringProtocol>(_ text: Text) {
        let start = count
        let copied = text.utf8.withContiguousStorageIfAvailable { source -> Int in
            precondition(source.count <= buffer.count - start, "UTF8Writer: capacity exceeded")
            if let from = source.baseAddress, let to = buffer.baseAddress {
                (to + start).update(from: from, count: source.count)
            }
            return source.count
        }
        if let copied {
            count += copied
        } else {
            for byte in text.utf8 {
                precondition(count < buffer.count, "UTF8Writer: capacity exceeded")
                buffer[count] = byte
                count += 1
            }
        }
    }
}

extension UTF8Writer {
    /// Appends bytes the caller vouches are UTF-8 (a slice of another string's UTF-8).
    @inlinable
    package mutating func put(utf8 bytes: UnsafeBufferPointer<UInt8>) {
        precondition(bytes.count <= buffer.count - count, "UTF8Writer: capacity exceeded")
        if let from = bytes.baseAddress, let to = buffer.baseAddress { (to + count).update(from: from, count: bytes.count) }
        count += bytes.count
    }
}

extension String {
    /// A string of at most `capacity` UTF-8 bytes written part by part by `body`.
    @inlinable
    package static func build(capacity: Int, _ body: (inout UTF8Writer) -> Void) -> String {
        String(unsafeUninitializedCapacity: capacity) { buffer in
            var writer = UTF8Writer(buffer)
            body(&writer)
            return writer.count
        }
    }
}
