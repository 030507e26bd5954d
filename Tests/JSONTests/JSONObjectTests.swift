import Testing

@testable import JSON

struct JSONObjectTests {
    @Test("insertNew refuses a key that is already present and keeps the first value")
    func insertNewRefusesDuplicates() {
        var object = JSONObject()
        let inserted1 = object.insertNew("a", 1)
        #expect(inserted1)
        let inserted2 = object.insertNew("a", 2)
        #expect(!inserted2)
        #expect(object["a"] == 1)
        #expect(object.count == 1)
    }

    @Test("setting a subscript replaces in place, appends new keys and removes on nil")
    func subscriptSetting() {
        var object: JSONObject = JSONObject(uniqueKeysWithValues: [("a", 1), ("b", 2), ("c", 3)])
        object["b"] = "two"
        object["d"] = 4
        object["a"] = nil
        #expect(object.keys == ["b", "c", "d"])
        #expect(object["b"] == "two")
        #expect(object["a"] == nil)
    }

    @Test("removing and replacing keys stays consistent once an object is indexed")
    func indexedMutation() {
        var object = JSONObject()
        for i in 0..<50 { object["k\(i)"] = .number(JSONNumber(i)) }
        object["k10"] = nil
        object["k20"] = "x"
        #expect(object.count == 49)
        #expect(object["k10"] == nil)
        #expect(object["k49"] == 49)
        #expect(object["k20"] == "x")
        let inserted3 = object.insertNew("k30", 0)
        #expect(!inserted3)
        let inserted4 = object.insertNew("k10", 0)
        #expect(inserted4)
        #expect(object.keys.last == "k10")
    }

    @Test("objects with the same members in a different order are equal")
    func equalityIgnoresOrder() throws {
        #expect(try JSONValue.parse("{\"a\":1,\"b\":2}") == JSONValue.parse("{\"b\":2,\"a\":1}"))
        #expect(try JSONValue.parse("{\"a\":1,\"b\":2}") != JSONValue.parse("{\"a\":1}"))
        #expect(try JSONValue.parse("{\"a\":1}") != JSONValue.parse("{\"a\":2}"))
    }

    @Test("iteration yields members in insertion order")
    func iterationOrder() {
        let object = JSONObject(uniqueKeysWithValues: [("z", 1), ("y", 2)])
        #expect(object.map(\.key) == ["z", "y"])
    }
}
