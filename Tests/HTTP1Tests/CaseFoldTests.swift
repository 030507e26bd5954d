import HTTP1
import Testing

/// The byte-at-a-time lowering the word version must agree with.
private func lowered(_ bytes: [UInt8]) -> [UInt8] { bytes.map(asciiLower) }

@Suite("ASCII case folding")
struct CaseFoldTests {
    @Test("eight bytes are lowered at once exactly as one at a time, for every byte value at every position")
    func wordLowersEveryByte() {
        var generator = SystemRandomNumberGenerator()
        for position in 0..<8 {
            for byte in UInt8.min...UInt8.max {
                var bytes = (0..<8).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
                bytes[position] = byte
                let word = bytes.withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }
                let expected = lowered(bytes).withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }
                #expect(asciiLowerWord(word) == expected, "byte \(byte) at \(position) in \(bytes)")
            }
        }
    }

    @Test("names of every length compare ignoring case, and any one changed byte makes them differ")
    func namesCompare() {
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.!#$%&'*+^`|~".utf8)
        for length in 0...40 {
            for _ in 0..<50 {
                let name = (0..<length).map { _ in alphabet.randomElement(using: &generator)! }
                let lower = lowered(name)
                let same = name.withUnsafeBufferPointer { a in
                    lower.withUnsafeBufferPointer { asciiEqualsLowercased(a, $0) }
                }
                #expect(same, "\(String(decoding: name, as: UTF8.self))")
                guard length > 0 else { continue }
                var changed = name
                let at = Int.random(in: 0..<length, using: &generator)
                // Any byte that does not lower to the same letter: control bytes and bytes >= 0x80 included.
                var other: UInt8
                repeat {
                    other = UInt8.random(in: .min ... .max, using: &generator)
                } while asciiLower(other) == lower[at]
                changed[at] = other
                let differs = changed.withUnsafeBufferPointer { a in
                    lower.withUnsafeBufferPointer { !asciiEqualsLowercased(a, $0) }
                }
                #expect(differs, "\(changed) against \(lower)")
            }
        }
    }

    @Test("a name and its lowercase of different lengths differ")
    func lengthsDiffer() {
        let a = Array("content-length".utf8), b = Array("content-lengths".utf8)
        #expect(!a.withUnsafeBufferPointer { x in b.withUnsafeBufferPointer { asciiEqualsLowercased(x, $0) } })
    }
}
