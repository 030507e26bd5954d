/// Bytes waiting to be written to one side of a tunnel, in order. Its storage goes once it
/// empties, so an idle tunnel holds none.
struct TunnelQueue {
    private var bytes: [UInt8] = []
    private var start = 0

    /// Bytes waiting.
    var count: Int { bytes.count - start }
    var isEmpty: Bool { start == bytes.count }

    mutating func append(_ more: [UInt8]) { bytes.append(contentsOf: more) }
    mutating func append(_ more: UnsafeRawBufferPointer) { bytes.append(contentsOf: more) }

    /// Calls `body` with the waiting bytes.
    func withReadable<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R {
        bytes.withUnsafeBytes { body(UnsafeRawBufferPointer(rebasing: $0[start...])) }
    }

    /// `n` bytes were written.
    mutating func consume(_ n: Int) {
        start += n
        if start == bytes.count {
            bytes = []
            start = 0
        } else if start >= 65536, start * 2 >= bytes.count {
            bytes.removeFirst(start)
            start = 0
        }
    }
}
