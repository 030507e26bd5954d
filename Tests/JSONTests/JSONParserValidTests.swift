import Testing

@testable import JSON

struct JSONParserValidTests {
    static let cases: [(input: String, expected: JSONValue)] = [
        ("null", nil),
        ("true", true),
        ("false", false),
        ("0", 0),
        ("-0", 0),
        ("42", 42),
        ("-17", -17),
        ("1.5", 1.5),
        ("-0.25", -0.25),
        ("1e3", 1000),
        ("1E+3", 1000),
        ("25e-1", 2.5),
        ("\"\"", ""),
        ("\"abc\"", "abc"),
        ("[]", []),
        ("{}", [:]),
        ("[1,2,3]", [1, 2, 3]),
        ("[[],[[]]]", [[], [[]]]),
        ("{\"a\":1,\"b\":[true,null]}", ["a": 1, "b": [true, nil]]),
        (" \t\r\n[ 1 , { \"k\" : \"v\" } ]\n ", [1, ["k": "v"]]),
        ("{\"\":0}", ["": 0]),
        ("\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"", "\"\\/\u{8}\u{c}\n\r\t"),
        ("\"\\u0041\\u00e9\\u4E2D\"", "Aé中"),
        ("\"\\ud83d\\ude00\"", "😀"),
        ("\"😀 héllo\"", "😀 héllo"),
        ("\"\\u0000\"", "\u{0}"),
        ("\"\u{7F}\"", "\u{7F}"),
        ("\"a\\nb\"", "a\nb"),
    ]

    @Test("every valid document in the table parses to the expected value", arguments: cases)
    func parsesValidDocument(input: String, expected: JSONValue) throws {
        #expect(try JSONValue.parse(input) == expected)
    }

    @Test("parsing from [UInt8], ArraySlice, a UTF8View and a raw buffer agree")
    func entryPointsAgree() throws {
        let text = "{\"list\":[1,\"two\",3.5]}"
        let bytes = Array(text.utf8)
        let expected: JSONValue = ["list": [1, "two", 3.5]]
        #expect(try JSONValue.parse(bytes) == expected)
        #expect(try JSONValue.parse(bytes[...]) == expected)
        #expect(try JSONValue.parse(text.utf8) == expected)
        #expect(try bytes.withUnsafeBytes { try JSONValue.parse($0) } == expected)
        #expect(try JSONValue.parse(AnyCollection(bytes)) == expected)
    }

    @Test("object members keep the order they were written in")
    func keepsKeyOrder() throws {
        let value = try JSONValue.parse("{\"z\":1,\"a\":2,\"m\":3}")
        #expect(value.objectValue?.keys == ["z", "a", "m"])
    }

    @Test("a large object with many keys parses and indexes every key")
    func largeObject() throws {
        let members = (0..<5000).map { "\"k\($0)\":\($0)" }.joined(separator: ",")
        let value = try JSONValue.parse("{\(members)}")
        #expect(value.objectValue?.count == 5000)
        #expect(value["k4999"] == 4999)
        #expect(value["k0"] == 0)
    }

    @Test("a long string with escapes spread through it decodes in full")
    func longEscapedString() throws {
        let chunk = String(repeating: "x", count: 1000)
        let text = "\"" + (0..<100).map { _ in chunk }.joined(separator: "\\n") + "\""
        let value = try JSONValue.parse(text)
        #expect(value.stringValue?.count == 100 * 1000 + 99)
    }
}
