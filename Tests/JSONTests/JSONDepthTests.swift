import Testing

@testable import JSON

struct JSONDepthTests {
    @Test("arrays nested exactly to the depth limit parse")
    func depthAtLimit() throws {
        let depth = JSONValue.defaultMaxDepth
        let text = String(repeating: "[", count: depth) + String(repeating: "]", count: depth)
        var value = try JSONValue.parse(text)
        var levels = 0
        while case .array(let items) = value {
            levels += 1
            guard let first = items.first else { break }
            value = first
        }
        #expect(levels == depth)
    }

    @Test("one level past the depth limit is rejected as too deep")
    func depthPastLimit() {
        let depth = JSONValue.defaultMaxDepth + 1
        let text = String(repeating: "[", count: depth) + String(repeating: "]", count: depth)
        #expect(parseError(text)?.code == .tooDeep)
    }

    @Test("hostile input nested a million levels deep fails fast without exhausting the stack")
    func millionLevels() {
        let text = String(repeating: "{\"a\":[", count: 1_000_000)
        #expect(parseError(text)?.code == .tooDeep)
    }

    @Test("a custom depth limit applies to objects and arrays alike")
    func customLimit() throws {
        #expect(try JSONValue.parse("{\"a\":[1]}", maxDepth: 2) == ["a": [1]])
        #expect(parseError("{\"a\":[[1]]}", maxDepth: 2)?.code == .tooDeep)
        #expect(try JSONValue.parse("7", maxDepth: 0) == 7)
    }
}
