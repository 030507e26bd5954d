import Foundation
import Testing

@testable import JSON

struct JSONRobustnessTests {
    @Test("randomly mutated documents either parse or throw, never crash, and agree with Foundation on validity")
    func mutationFuzz() throws {
        var rng = SystemRandomNumberGenerator()
        let interesting: [UInt8] = Array("{}[],:\"\\-+.eE0123456789tfnul \n\t".utf8) + [0x00, 0x1F, 0x80, 0xC3, 0xFF]
        var disagreements: [String] = []
        for _ in 0..<3000 {
            var bytes = RandomJSON.value(depth: 3, using: &rng).serializedBytes()
            for _ in 0..<Int.random(in: 1...3, using: &rng) {
                let i = Int.random(in: 0...bytes.count, using: &rng)
                switch Int.random(in: 0..<3, using: &rng) {
                case 0: bytes.insert(interesting.randomElement(using: &rng)!, at: i)
                case 1 where i < bytes.count: bytes.remove(at: i)
                default: if i < bytes.count { bytes[i] = interesting.randomElement(using: &rng)! }
                }
            }
            let ours = parseError(bytes) == nil
            let foundation = (try? JSONSerialization.jsonObject(with: Data(bytes), options: [.fragmentsAllowed])) != nil
            // Foundation accepts duplicate keys and out-of-range numbers; we reject them on purpose.
            if ours && !foundation {
                disagreements.append(String(decoding: bytes, as: UTF8.self).debugDescription)
            }
        }
        #expect(disagreements.isEmpty, "we accepted what Foundation rejects: \(disagreements.prefix(5))")
    }

    @Test("a 10 MB array of numbers and strings parses")
    func largeDocument() throws {
        var text = "["
        text.reserveCapacity(10_000_000)
        for i in 0..<500_000 { text += "\(i),\"item\(i)\"," }
        text += "0]"
        let value = try JSONValue.parse(text)
        #expect(value.arrayValue?.count == 1_000_001)
    }
}
