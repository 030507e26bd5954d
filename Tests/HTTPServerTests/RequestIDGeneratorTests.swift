import Testing
@testable import HTTPServer
import EventLoop

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

    @Test("ids are hex-random, loop index and counter separated by '-'")
    func format() {
        var generator = RequestIDGenerator(loopIndex: 11)
        let id = generator.next()
        let parts = id.split(separator: "-", omittingEmptySubsequences: false)
        #expect(parts.count == 3)
        #expect(parts.allSatisfy { !$0.isEmpty && $0.allSatisfy(\.isHexDigit) })
        #expect(parts.count == 3 && parts[1] == "b" && parts[2] == "1")
        #expect(generator.next().hasSuffix("-b-2"))
    }

    @Test("the counter is written in lowercase hex across every digit-count change up to 0x10000")
    func counterDigits() {
        var generator = RequestIDGenerator(loopIndex: 3)
        let prefix = String(generator.next().dropLast())
        for value in 2...0x10000 {
            #expect(generator.next() == prefix + String(value, radix: 16), "value \(value)")
        }
    }
}
