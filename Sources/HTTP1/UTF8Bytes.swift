/// A string's UTF-8 bytes, borrowed. `withUTF8` is `mutating` (it may make a foreign string
/// native), so calling it on a `let` takes a `var` copy: a retain and a release each time, several
/// per request on the forwarding path. The UTF-8 view's contiguous storage is read in place; on
/// Linux every string has it (a small string's bytes are lent from the stack), and the copy is
/// only the fallback. One extension per type, not one on `StringProtocol`: through the protocol, a
/// substring's view was retained for the call (two more retains per request, counted).
extension String {
    @inlinable @inline(__always)
    public func withUTF8Bytes<Result>(_ body: (UnsafeBufferPointer<UInt8>) throws -> Result) rethrows -> Result {
        if let result = try utf8.withContiguousStorageIfAvailable(body) { return result }
        var copy = self
        return try copy.withUTF8(body)
    }
}

extension Substring {
    @inlinable @inline(__always)
    public func withUTF8Bytes<Result>(_ body: (UnsafeBufferPointer<UInt8>) throws -> Result) rethrows -> Result {
        if let result = try utf8.withContiguousStorageIfAvailable(body) { return result }
        var copy = self
        return try copy.withUTF8(body)
    }
}
