import Testing

@testable import JSON

struct JSONNumberTests {
    static let exactIntegers: [(String, Int64?)] = [
        ("0", 0), ("-0", 0), ("42", 42), ("-42", -42),
        ("1e3", 1000), ("1.0", 1), ("1.50e1", 15), ("0.0", 0), ("12300e-2", 123),
        ("1.5", nil), ("1e-1", nil), ("0.1e1", 1),
        ("9007199254740993", 9_007_199_254_740_993),
        ("9223372036854775807", .max), ("-9223372036854775808", .min),
        ("9223372036854775808", nil), ("-9223372036854775809", nil),
        ("1e19", nil), ("1e18", 1_000_000_000_000_000_000),
        ("0e999999999", 0), ("1e300", nil), ("-1e-300", nil),
    ]

    @Test("the literal decides exact integers, beyond 2^53 and up to Int64's limits", arguments: exactIntegers)
    func exactInteger(text: String, expected: Int64?) throws {
        let value = try JSONValue.parse(text)
        #expect(value.int64Value == expected)
    }

    @Test("integers past 2^53 keep their literal when re-serialized")
    func bigIntegerRoundTrip() throws {
        let text = "[9007199254740993,12345678901234567890123]"
        #expect(try JSONValue.parse(text).serialized() == text)
    }

    @Test("two integer literals past 2^53 that round to the same double are not equal")
    func bigIntegersCompareExactly() throws {
        let a = try JSONValue.parse("9007199254740993")
        let b = try JSONValue.parse("9007199254740992")
        #expect(a != b)
        #expect(try JSONValue.parse("1.0") == JSONValue.parse("1"))
        #expect(try JSONValue.parse("1e2") == 100)
    }

    static let doubles: [(Double, String)] = [
        (0, "0"), (-0.0, "0"), (1, "1"), (-3, "-3"), (1e15, "1000000000000000"),
        (1.5, "1.5"), (0.1, "0.1"), (-2.25, "-2.25"), (1e20, "1e+20"), (.leastNonzeroMagnitude, "5e-324"),
        (.infinity, "null"), (.nan, "null"),
    ]

    @Test("doubles serialize compactly: integral values without .0, non-finite as null", arguments: doubles)
    func doubleSerialization(value: Double, expected: String) {
        #expect(JSONValue.number(JSONNumber(value)).serialized() == expected)
    }

    @Test("every serialized finite double parses back to the same double")
    func doubleRoundTrip() throws {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2000 {
            let bits = generator.next() as UInt64
            let value = Double(bitPattern: bits)
            guard value.isFinite else { continue }
            let text = JSONValue.number(JSONNumber(value)).serialized()
            #expect(try JSONValue.parse(text).doubleValue == value, "\(text)")
        }
    }

    @Test("long numbers convert with correct rounding")
    func longNumbers() throws {
        #expect(try JSONValue.parse("0.30000000000000004").doubleValue == 0.30000000000000004)
        #expect(try JSONValue.parse("123456789012345678").doubleValue == 123456789012345678.0)
        #expect(try JSONValue.parse("1e-400").doubleValue == 0)
        #expect(try JSONValue.parse("-123456789012345").doubleValue == -123_456_789_012_345)
    }
}

struct JSONNumberEdgeTests {
    @Test("a hostile exponent with a billion digits' worth of magnitude does not hang or overflow integer detection")
    func hostileExponent() {
        #expect(JSONNumber.exactInteger("1e999999999999999999") == nil)
        #expect(JSONNumber.exactInteger("0e999999999999999999") == 0)
        #expect(JSONNumber.exactInteger("1" + String(repeating: "0", count: 400) + "e-400") == 1)
    }

    @Test("numbers built from Int and Int64 keep their exact text")
    func integerInitializers() {
        #expect(JSONNumber(Int64.max).text == "9223372036854775807")
        #expect(JSONNumber(-5).int64 == -5)
        #expect(JSONValue.number(JSONNumber(12)).serialized() == "12")
    }
}
