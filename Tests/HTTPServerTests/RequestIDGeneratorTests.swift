import EventLoop
import Testing

@testable import HTTPServer

@Suite("RequestIDGenerator")
struct RequestIDGeneratorTests {
    @Test("100 000 ids from one generator are unique")
    func uniqueOverManyIDs() {
        var generator = RequestIDGenerator(loopIndex: 0)
        var seen = Set<String>()
        for _ in 0..<100_000 { seen.insert(generator.next()) }
        #expect(seen.count == 100_000)
    }

    @Test("generators of different loops never collide")
    func loopsNeverCollide() {
        var a = RequestIDGenerator(loopIndex: 0)
        var b = RequestIDGenerator(loopIndex: 1)
        let first = Set((0..<1_000).map { _ in a.next() })
        let second = Set((0..<1_000).map { _ in b.next() })
        #expect(first.count == 1_000)
        #expect(first.isDisjoint(with: second))
    }

    /// `value` in base 62 (`0-9a-zA-Z`), written the plain way, to check the generator against.
    static func base62(_ value: UInt64) -> String {
        let alphabet = Array("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
        var rest = value, out = ""
        repeat { out = String(alphabet[Int(rest % 62)]) + out; rest /= 62 } while rest > 0
        return out
    }

    @Test("ids are a random base-62 part, the loop index and the counter, separated by '-'")
    func format() {
        var generator = RequestIDGenerator(loopIndex: 11)
        let id = generator.next()
        let parts = id.split(separator: "-", omittingEmptySubsequences: false)
        #expect(parts.count == 3)
        #expect(parts.allSatisfy { !$0.isEmpty && $0.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber) } })
        #expect(parts.count == 3 && parts[0].count == 6 && parts[1] == "b" && parts[2] == "1")
        #expect(generator.next().hasSuffix("-b-2"))
        var high = RequestIDGenerator(loopIndex: 62 * 3 + 61)
        #expect(high.next().split(separator: "-")[1] == "3Z")
    }

    @Test("the counter is written in base 62 across every digit-count change up to 62^3 + 1")
    func counterDigits() {
        var generator = RequestIDGenerator(loopIndex: 3)
        let prefix = String(generator.next().dropLast())
        for value in UInt64(2)...(62 * 62 * 62 + 1) {
            let id = generator.next()
            #expect(id == prefix + Self.base62(value), "value \(value)")
        }
    }

    @Test("ids stay within the 15-byte small-string form up to six counter digits")
    func smallStringBound() {
        var generator = RequestIDGenerator(loopIndex: 1)
        #expect(generator.next().utf8.count == 10)
        generator.counter = 56_800_235_582  // 62^6 - 2
        let last = generator.next()
        #expect(last.utf8.count == 15 && last.hasSuffix("-1-ZZZZZZ"), "\(last)")
        let longer = generator.next()
        #expect(longer.utf8.count == 16 && longer.hasSuffix("-1-1000000"), "\(longer)")
    }
}
