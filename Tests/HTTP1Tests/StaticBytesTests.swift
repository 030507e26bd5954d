import HTTP1
import Testing

@Suite("StaticBytes")
struct StaticBytesTests {
    @Test("appending a literal to an array copies exactly its bytes, after what was there")
    func appendsItsBytes() {
        var bytes: [UInt8] = [0x41]
        bytes.append(contentsOf: StaticBytes("x-request-id"))
        #expect(bytes == [0x41] + Array("x-request-id".utf8))
        var empty: [UInt8] = []
        empty.append(contentsOf: StaticBytes("\r\n"))
        #expect(empty == [0x0D, 0x0A])
    }

    @Test("a copy into a shorter buffer stops at its end, and the iterator goes on from there")
    func copiesIntoShorterBuffer() {
        let literal = StaticBytes("abcdef")
        var buffer = [UInt8](repeating: 0, count: 4)
        let (rest, copied) = buffer.withUnsafeMutableBufferPointer { literal._copyContents(initializing: $0) }
        #expect(copied == 4)
        #expect(buffer == Array("abcd".utf8))
        #expect(Array(IteratorSequence(rest)) == Array("ef".utf8))
    }

    @Test("iterating, counting and indexing agree with the literal's UTF-8")
    func collectionAgrees() {
        let literal = StaticBytes("content-length")
        #expect(Array(literal) == Array("content-length".utf8))
        #expect(literal.count == 14)
        #expect(literal[7] == UInt8(ascii: "-"))
        #expect(literal.elementsEqual("content-length".utf8))
    }
}
