import Testing

@testable import Config

@Suite("UTF8Writer")
struct UTF8WriterTests {
    @Test("a string built from parts equals the parts concatenated, multi-byte and empty parts included")
    func buildsConcatenation() {
        let parts: [Substring] = ["https", "://", "", "bücher.example", ":", "8443", "/päth/€", "?", "q=ü", ""]
        let expected = parts.joined()
        let built = String.build(capacity: parts.reduce(0) { $0 + $1.utf8.count }) { writer in
            for part in parts { writer.put(part) }
        }
        #expect(built == expected)
        #expect(built.utf8.count == expected.utf8.count)
    }

    @Test("a capacity larger than what is written leaves no trailing bytes")
    func spareCapacity() {
        let built = String.build(capacity: 64) {
            $0.put("abc"); $0.put(Substring("def"))
        }
        #expect(built == "abcdef")
        #expect(built.utf8.count == 6)
    }
}
