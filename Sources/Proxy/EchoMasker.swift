import CLinux
import Glibc

/// Masks an injected token where a response echoes it (debug and echo endpoints reflect request
/// headers): each occurrence becomes as many `*`, so lengths, and `Content-Length`, stay true.
/// Streaming: bytes that could begin an occurrence completed by the next chunk are held back
/// (at most the token's length − 1) until it arrives or the body ends.
struct EchoMasker {
    /// The token bytes (without the `Bearer ` prefix: an echo may quote the token alone).
    let token: [UInt8]
    /// Bytes held back because they are a prefix of the token.
    private var carry: [UInt8] = []
    /// Occurrences masked so far.
    private(set) var masked = 0

    /// Tokens shorter than this are not masked: masking them would corrupt ordinary text.
    static let minimumTokenBytes = 8
    static let maskByte = UInt8(ascii: "*")

    /// A masker for `token`, or nil when it is too short to be told apart from ordinary text.
    init?(token: [UInt8]) {
        guard token.count >= Self.minimumTokenBytes else { return nil }
        self.token = token
    }

    /// Takes the next body bytes; `emit` receives what may be written now (nothing, or one buffer).
    mutating func process(_ bytes: UnsafeRawBufferPointer, emit: (UnsafeRawBufferPointer) -> Void) {
        guard !bytes.isEmpty else { return }
        if carry.isEmpty && Self.find(token, in: bytes, from: 0) == nil {
            // The common case: no occurrence, nothing held; only a partial one at the end waits.
            let held = heldSuffix(bytes)
            if held < bytes.count { emit(UnsafeRawBufferPointer(rebasing: bytes[..<(bytes.count - held)])) }
            if held > 0 { carry.append(contentsOf: bytes[(bytes.count - held)...]) }
            return
        }
        var work = carry
        work.append(contentsOf: bytes)
        carry.removeAll(keepingCapacity: true)
        work.withUnsafeMutableBytes { buffer in
            maskAll(buffer)
            let held = heldSuffix(UnsafeRawBufferPointer(buffer))
            if held < buffer.count { emit(UnsafeRawBufferPointer(rebasing: buffer[..<(buffer.count - held)])) }
            if held > 0 { carry.append(contentsOf: buffer[(buffer.count - held)...]) }
        }
    }

    /// The body ended: `emit` receives the bytes still held (a partial token is no token).
    mutating func finish(emit: (UnsafeRawBufferPointer) -> Void) {
        guard !carry.isEmpty else { return }
        carry.withUnsafeBytes { emit($0) }
        carry.removeAll()
    }

    /// Masks every occurrence in `buffer`, counting them.
    mutating func maskAll(_ buffer: UnsafeMutableRawBufferPointer) {
        var from = 0
        while let at = Self.find(token, in: UnsafeRawBufferPointer(buffer), from: from) {
            for i in at..<(at + token.count) { buffer[i] = Self.maskByte }
            masked += 1
            from = at + token.count
        }
    }

    /// `bytes` with every occurrence masked, or nil when there is none (a header value).
    mutating func masking(_ bytes: ArraySlice<UInt8>) -> [UInt8]? {
        guard bytes.count >= token.count, bytes.withUnsafeBytes({ Self.find(token, in: $0, from: 0) }) != nil else { return nil }
        var copy = Array(bytes)
        copy.withUnsafeMutableBytes { maskAll($0) }
        return copy
    }

    /// The length of the longest suffix of `bytes` that is a proper prefix of the token.
    private func heldSuffix(_ bytes: UnsafeRawBufferPointer) -> Int {
        let first = token[0]
        var k = min(token.count - 1, bytes.count)
        while k > 0 {
            let start = bytes.count - k
            if bytes[start] == first, token.withUnsafeBytes({ memcmp(bytes.baseAddress! + start, $0.baseAddress!, k) == 0 }) {
                return k
            }
            k -= 1
        }
        return 0
    }

    /// The offset of the first `needle` in `haystack` at or after `from` (glibc's two-way memmem).
    static func find(_ needle: [UInt8], in haystack: UnsafeRawBufferPointer, from: Int) -> Int? {
        guard haystack.count - from >= needle.count, let base = haystack.baseAddress else { return nil }
        return needle.withUnsafeBytes { n in
            cl_memmem(base + from, haystack.count - from, n.baseAddress!, n.count).map { base.distance(to: UnsafeRawPointer($0)) }
        }
    }
}
