/// Writes UTF-8 into the buffer `String(unsafeUninitializedCapacity:initializingUTF8With:)` hands
/// over: a string built from parts with one allocation and one copy per part. `+=` on a String
/// checks capacity and may grow and copy for every part, and the upstream URL is built for every
/// forwarded request (bench/cost-profile.sh counts the instructions per request).
public struct UTF8Writer {
    @usableFromInline let buffer: UnsafeMutableBufferPointer<UInt8>
    /// Bytes written so far (settable only because the `@inlinable` writers advance it).
    public var count = 0

    @inlinable
    public init(_ buffer: UnsafeMutableBufferPointer<UInt8>) { self.buffer = buffer }

    /// Appends bytes the caller vouches are UTF-8 (a string's, or a slice of them at scalar
    /// boundaries); traps if the capacity given to `String.build` is exceeded.
    @inlinable
    public mutating func put(utf8 bytes: UnsafeBufferPointer<UInt8>) {
        precondition(bytes.count <= buffer.count - count, "UTF8Writer: capacity exceeded")
        if let from = bytes.baseAddress, let to = buffer.baseAddress {
            (to + count).update(from: from, count: bytes.count)
        }
        count += bytes.count
    }

    /// Appends `text`'s UTF-8; traps if the capacity given to `String.build` is exceeded.
    @inlinable
    public mutating func put<Text: StringProtocol>(_ text: Text) {
        let copied: Void? = text.utf8.withContiguousStorageIfAvailable { put(utf8: $0) }
        if copied == nil {
            for byte in text.utf8 {
                precondition(count < buffer.count, "UTF8Writer: capacity exceeded")
                buffer[count] = byte
                count += 1
            }
        }
    }
}

extension String {
    /// The same text in storage of its own: an event loop's copy, so the reference counts its
    /// requests write are not another loop's (docs/performance.md, "Nothing shared is written").
    public func privateCopy() -> String { String(decoding: Array(utf8), as: UTF8.self) }

    /// A string of at most `capacity` UTF-8 bytes written part by part by `body`.
    @inlinable
    public static func build(capacity: Int, _ body: (inout UTF8Writer) -> Void) -> String {
        String(unsafeUninitializedCapacity: capacity) { buffer in
            var writer = UTF8Writer(buffer)
            body(&writer)
            return writer.count
        }
    }
}
