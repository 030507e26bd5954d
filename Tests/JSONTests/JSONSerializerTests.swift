import Foundation
import Testing

@testable import JSON

struct JSONSerializerTests {
    static let roundTrips = [
        "null", "true", "[]", "{}", "\"\"", "[1,-2,3.25,1e+20,0.5]",
        "{\"b\":1,\"a\":[true,false,null],\"c\":{\"d\":\"e\"}}",
        "\"line\\nbreak \\\"quoted\\\" back\\\\slash \\t tab\"",
        "\"\\u0000\\u001f\"", "\"é中😀\"", "[[[[]]],{}]",
    ]

    @Test("compact documents serialize back to exactly the same text", arguments: roundTrips)
    func roundTrip(text: String) throws {
        #expect(try JSONValue.parse(text).serialized() == text)
    }

    @Test("serialization escapes quotes, backslashes and control characters but not '/' or non-ASCII")
    func escaping() {
        let value: JSONValue = ["k\"ey": "a/b\u{1}\u{8}\u{c}\n\r\t\\é"]
        #expect(value.serialized() == "{\"k\\\"ey\":\"a/b\\u0001\\b\\f\\n\\r\\t\\\\é\"}")
    }

    @Test(
        "the word-at-a-time escape check agrees with the byte test for every byte at every offset, and jsonEscape with jsonEscaped"
    )
    func escapeScanAgrees() {
        for length in [1, 7, 8, 9, 15, 16, 17, 24] {
            for position in 0..<length {
                for byte in 0...255 {
                    var bytes = [UInt8](repeating: UInt8(ascii: "a"), count: length)
                    bytes[position] = UInt8(byte)
                    let expected = bytes.contains(where: JSONSerializer.needsEscape)
                    #expect(
                        bytes.withUnsafeBufferPointer { JSONSerializer.anyNeedsEscape($0) } == expected,
                        "byte \(byte) at \(position) of \(length)")
                }
            }
        }
        for text in [
            "", "plain-ascii-path/with/slashes", "quote\"inside a long enough string", "tab\there", "back\\slash",
            "ünïcødé stays as UTF-8 bytes", "\u{7f} DEL is not escaped", "12345678\n",
        ] {
            var out: [UInt8] = []
            Array(text.utf8).withUnsafeBufferPointer { bytes in jsonEscape(bytes) { out.append($0) } }
            #expect(String(decoding: out, as: UTF8.self) == jsonEscaped(text))
            #expect(Array(text.utf8).withUnsafeBufferPointer { jsonNeedsEscaping($0) } == (jsonEscaped(text) != text))
        }
    }

    @Test("jsonEscaped leaves plain strings alone and escapes the rest without adding quotes")
    func jsonEscapedHelper() {
        #expect(jsonEscaped("host_not_allowed") == "host_not_allowed")
        #expect(jsonEscaped("say \"hi\"\n") == "say \\\"hi\\\"\\n")
        #expect(jsonEscaped("\u{1f}") == "\\u001f")
        #expect(jsonQuoted("a\\b") == "\"a\\\\b\"")
        #expect(jsonEscaped("") == "")
    }

    @Test("hand-built JSON with jsonQuoted parses back to the original strings")
    func handBuiltParses() throws {
        let nasty = "\"\\\u{0}\u{7f}\u{2028}😀</script>"
        let text = "{\"error\":\(jsonQuoted("bad_request")),\"message\":\(jsonQuoted(nasty))}"
        #expect(try JSONValue.parse(text) == ["error": "bad_request", "message": .string(nasty)])
    }

    @Test("Foundation's JSONSerialization accepts what we serialize and reads the same values")
    func foundationAgrees() throws {
        let value: JSONValue = ["s": "é\n\"", "n": [1, 2.5, -3], "b": true, "z": nil, "o": ["k": "v"]]
        let object = try JSONSerialization.jsonObject(with: Data(value.serializedBytes())) as? [String: Any]
        #expect(object?["s"] as? String == "é\n\"")
        #expect((object?["n"] as? [Any])?.count == 3)
        #expect(object?["b"] as? Bool == true)
        #expect(object?["z"] is NSNull)
    }

    @Test("random values survive serialize-then-parse unchanged")
    func randomRoundTrips() throws {
        var rng = SystemRandomNumberGenerator()
        for _ in 0..<300 {
            let value = RandomJSON.value(depth: 4, using: &rng)
            #expect(try JSONValue.parse(value.serialized()) == value)
        }
    }
}
