@testable import JSON

/// Random JSON values and byte mutations for round-trip and robustness tests.
enum RandomJSON {
    static let alphabet: [String] = ["a", "Z", "0", " ", "\"", "\\", "/", "\n", "\u{1}", "é", "中", "😀", "\u{7f}"]

    static func string(using rng: inout some RandomNumberGenerator) -> String {
        let length = Int.random(in: 0...8, using: &rng)
        return (0..<length).map { _ in alphabet.randomElement(using: &rng)! }.joined()
    }

    static func value(depth: Int, using rng: inout some RandomNumberGenerator) -> JSONValue {
        let kind = Int.random(in: 0..<(depth > 0 ? 7 : 5), using: &rng)
        switch kind {
        case 0: return .null
        case 1: return .bool(Bool.random(using: &rng))
        case 2: return .number(JSONNumber(Int64.random(in: -1_000_000...1_000_000, using: &rng)))
        case 3: return .number(JSONNumber(Double.random(in: -1e6...1e6, using: &rng)))
        case 4: return .string(string(using: &rng))
        case 5:
            let count = Int.random(in: 0...4, using: &rng)
            return .array((0..<count).map { _ in value(depth: depth - 1, using: &rng) })
        default:
            var object = JSONObject()
            for _ in 0..<Int.random(in: 0...4, using: &rng) {
                object.insertNew(string(using: &rng), value(depth: depth - 1, using: &rng))
            }
            return .object(object)
        }
    }
}
