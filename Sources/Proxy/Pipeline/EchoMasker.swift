import Glibc
import HTTP1

/// Masks an injected token where a response echoes it (debug and echo endpoints reflect request
/// headers): each occurrence becomes as many `*`, so lengths, and `Content-Length`, stay true.
/// It looks for the token as sent and, when the token holds a `/`, for the token as JSON may
/// escape it (`\/`: PHP's `json_encode` by default, and encoders that make JSON safe to embed in
/// HTML). It reads the bytes as they come: the proxy sees identity bytes on masked routes
/// (`ForwardedExchange`, docs/security.md, "Echoed credentials").
/// Streaming: bytes that could begin an occurrence completed by the next chunk are held back
/// (fewer than the longest form's length) until it arrives or the body ends.
struct EchoMasker {
    /// The token bytes (without the `Bearer ` prefix: an echo may quote the token alone).
    let token: [UInt8]
    /// The token as sent.
    private let plain: Needle
    /// The token with each `/` escaped as `\/`, when it holds one.
    private let escaped: Needle?
    /// Bytes held back because they are a prefix of a form.
    private var carry: [UInt8] = []
    /// Occurrences masked so far.
    private(set) var masked = 0

    /// Tokens shorter than this are not masked: masking them would corrupt ordinary text.
    static let minimumTokenBytes = 8
    static let maskByte = UInt8(ascii: "*")

    /// A masker for `token`, or nil when it is shorter than `minimumBytes` (by default too short
    /// to be told apart from ordinary text).
    init?(token: [UInt8], minimumBytes: Int = EchoMasker.minimumTokenBytes) {
        guard !token.isEmpty, token.count >= minimumBytes else { return nil }
        self.token = token
        plain = Needle(token)
        let slash = UInt8(ascii: "/")
        escaped =
            token.contains(slash) ? Needle(token.flatMap { $0 == slash ? [UInt8(ascii: "\\"), slash] : [$0] }) : nil
    }

    /// Takes the next body bytes; `emit` receives what may be written now (nothing, or one buffer).
    mutating func process(_ bytes: UnsafeRawBufferPointer, emit: (UnsafeRawBufferPointer) -> Void) {
        guard !bytes.isEmpty else { return }
        if carry.isEmpty && find(in: bytes, from: 0) == nil {
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

    /// Masks every occurrence of any form in `buffer`, counting them.
    mutating func maskAll(_ buffer: UnsafeMutableRawBufferPointer) {
        var from = 0
        while let hit = find(in: UnsafeRawBufferPointer(buffer), from: from) {
            for i in hit.at..<(hit.at + hit.length) { buffer[i] = Self.maskByte }
            masked += 1
            from = hit.at + hit.length
        }
    }

    /// `bytes` with every occurrence masked in any ASCII case, or nil when there is none: a
    /// field name, which frameworks re-case (Go's `X-Echo-At-5ecret…`) and HTTP/2 lowercases.
    /// Only names as long as the token get here, so the plain scan costs nothing in practice.
    /// (A name cannot hold the escaped form: `\` is no token character.)
    mutating func maskingIgnoringCase(_ bytes: ArraySlice<UInt8>) -> [UInt8]? {
        guard bytes.count >= token.count else { return nil }
        var copy = Array(bytes)
        var found = false
        var at = 0
        while at + token.count <= copy.count {
            var i = 0
            while i < token.count && asciiLower(copy[at + i]) == asciiLower(token[i]) { i += 1 }
            guard i == token.count else {
                at += 1
                continue
            }
            for j in at..<(at + token.count) { copy[j] = Self.maskByte }
            masked += 1
            found = true
            at += token.count
        }
        return found ? copy : nil
    }

    /// `bytes` with every occurrence masked, or nil when there is none (a header value).
    mutating func masking(_ bytes: ArraySlice<UInt8>) -> [UInt8]? {
        guard bytes.count >= token.count, bytes.withUnsafeBytes({ find(in: $0, from: 0) }) != nil else { return nil }
        var copy = Array(bytes)
        copy.withUnsafeMutableBytes { maskAll($0) }
        return copy
    }

    /// The length of the longest suffix of `bytes` that is a proper prefix of a form.
    private func heldSuffix(_ bytes: UnsafeRawBufferPointer) -> Int {
        let held = plain.heldSuffix(bytes, longerThan: 0)
        return escaped?.heldSuffix(bytes, longerThan: held) ?? held
    }

    /// The first occurrence of any form in `haystack` at or after `from`, and its length.
    func find(in haystack: UnsafeRawBufferPointer, from: Int) -> (at: Int, length: Int)? {
        let first = plain.find(in: haystack, from: from).map { (at: $0, length: plain.bytes.count) }
        guard let escaped, let at = escaped.find(in: haystack, from: from), at < first?.at ?? Int.max else {
            return first
        }
        return (at, escaped.bytes.count)
    }

    /// One form of the token and how it is searched for.
    private struct Needle {
        let bytes: [UInt8]
        /// The position of its least common byte in ordinary text: the search looks for that
        /// byte with `memchr` (vectorised) and compares the whole form only there.
        let anchor: Int

        init(_ bytes: [UInt8]) {
            self.bytes = bytes
            let rank = EchoMasker.commonness
            var anchor = 0
            for i in bytes.indices where rank[Int(bytes[i])] < rank[Int(bytes[anchor])] { anchor = i }
            self.anchor = anchor
        }

        /// The longest suffix of `haystack` longer than `shorter` that is a proper prefix of the
        /// form, or `shorter` when there is none.
        func heldSuffix(_ haystack: UnsafeRawBufferPointer, longerThan shorter: Int) -> Int {
            let first = bytes[0]
            var k = min(bytes.count - 1, haystack.count)
            while k > shorter {
                let start = haystack.count - k
                if haystack[start] == first,
                    bytes.withUnsafeBytes({ memcmp(haystack.baseAddress! + start, $0.baseAddress!, k) == 0 })
                {
                    return k
                }
                k -= 1
            }
            return shorter
        }

        /// The offset of the first occurrence in `haystack` at or after `from`.
        func find(in haystack: UnsafeRawBufferPointer, from: Int) -> Int? {
            let length = bytes.count
            guard haystack.count - from >= length, let base = haystack.baseAddress else { return nil }
            let key = bytes[anchor]
            var start = from
            // Candidate starts run up to count − length; the anchor byte sits `anchor` after each.
            while start <= haystack.count - length {
                let window = haystack.count - length - start + 1
                guard let hit = memchr(base + start + anchor, Int32(key), window) else { return nil }
                let candidate = base.distance(to: UnsafeRawPointer(hit)) - anchor
                // First and last byte before the call: most anchor hits in ordinary text end there.
                if haystack[candidate] == bytes[0], haystack[candidate + length - 1] == bytes[length - 1],
                    bytes.withUnsafeBytes({ memcmp(base + candidate, $0.baseAddress!, length) }) == 0
                {
                    return candidate
                }
                start = candidate + 1
            }
            return nil
        }
    }

    /// How often each byte appears in ordinary text and JSON, roughly (higher: more often):
    /// lowercase letters by English frequency, then digits and the usual punctuation (frequent
    /// in JSON numbers, dates and names), uppercase letters, and the rest.
    static let commonness: [Int] = {
        var rank = [Int](repeating: 10, count: 256)
        for (i, letter) in letterOrder.enumerated() { rank[Int(letter)] = 100 - 3 * i }
        for digit in UInt8(ascii: "0")...UInt8(ascii: "9") { rank[Int(digit)] = 70 }
        for mark in Array("-.:,/_\\".utf8) { rank[Int(mark)] = 60 }
        for letter in UInt8(ascii: "A")...UInt8(ascii: "Z") { rank[Int(letter)] = 30 }
        return rank
    }()

    private static let letterOrder = Array("etaoinshrdlucmfwypvbgkjqxz".utf8)
}
