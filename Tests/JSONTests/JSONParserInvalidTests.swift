import Testing

@testable import JSON

struct JSONParserInvalidTests {
    struct Case: Sendable, CustomStringConvertible {
        var input: [UInt8]
        var code: JSONParseError.Code
        var line: Int
        var column: Int
        init(_ input: String, _ code: JSONParseError.Code, _ column: Int) {
            self.init(input, code, 1, column)
        }
        init(_ input: String, _ code: JSONParseError.Code, _ line: Int, _ column: Int) {
            self.input = Array(input.utf8)
            self.code = code
            self.line = line
            self.column = column
        }
        init(bytes: [UInt8], _ code: JSONParseError.Code, _ column: Int) {
            input = bytes
            self.code = code
            line = 1
            self.column = column
        }
        var description: String { String(decoding: input, as: UTF8.self).debugDescription }
    }

    static let cases: [Case] = [
        Case("", .unexpectedEnd, 1),
        Case("   ", .unexpectedEnd, 4),
        Case("[", .unexpectedEnd, 2),
        Case("[1,", .unexpectedEnd, 4),
        Case("{\"a\"", .unexpectedEnd, 5),
        Case("{\"a\":", .unexpectedEnd, 6),
        Case("tru", .invalidLiteral, 1),
        Case("nul", .invalidLiteral, 1),
        Case("True", .unexpectedCharacter, 1),
        Case("NaN", .unexpectedCharacter, 1),
        Case("Infinity", .unexpectedCharacter, 1),
        Case("-Infinity", .invalidNumber, 2),
        Case("undefined", .unexpectedCharacter, 1),
        Case("01", .invalidNumber, 1),
        Case("-01", .invalidNumber, 2),
        Case("00", .invalidNumber, 1),
        Case("1.", .unexpectedEnd, 3),
        Case("1.e5", .invalidNumber, 3),
        Case(".5", .unexpectedCharacter, 1),
        Case("+1", .unexpectedCharacter, 1),
        Case("1e", .unexpectedEnd, 3),
        Case("1e+", .unexpectedEnd, 4),
        Case("0x10", .trailingData, 2),
        Case("1e400", .numberOutOfRange, 1),
        Case("-1e400", .numberOutOfRange, 1),
        Case("[1,]", .trailingComma, 4),
        Case("{\"a\":1,}", .trailingComma, 8),
        Case("[1 2]", .unexpectedCharacter, 4),
        Case("{\"a\" 1}", .unexpectedCharacter, 6),
        Case("{\"a\":1 \"b\":2}", .unexpectedCharacter, 8),
        Case("{a:1}", .unexpectedCharacter, 2),
        Case("{'a':1}", .unexpectedCharacter, 2),
        Case("[,1]", .unexpectedCharacter, 2),
        Case("{\"a\":1,\"a\":2}", .duplicateKey, 8),
        Case("1 2", .trailingData, 3),
        Case("{} x", .trailingData, 4),
        Case("[1]]", .trailingData, 4),
        Case("// comment\n1", .unexpectedCharacter, 1),
        Case("\"abc", .invalidString, 1),
        Case("\"a\nb\"", .invalidString, 3),
        Case("\"a\tb\"", .invalidString, 3),
        Case("\"\\x\"", .invalidEscape, 2),
        Case("\"\\'\"", .invalidEscape, 2),
        Case("\"\\u12\"", .invalidEscape, 2),
        Case("\"\\u12G4\"", .invalidEscape, 2),
        Case("\"\\ud800\"", .invalidUnicode, 2),
        Case("\"\\ud800\\u0041\"", .invalidUnicode, 2),
        Case("\"\\udc00\"", .invalidUnicode, 2),
        Case("\"\\ud800x\"", .invalidUnicode, 2),
        Case("[1,\n 2,\n x]", .unexpectedCharacter, 3, 2),
        Case("{\n  \"é\": 1,\n  \"é\": 2\n}", .duplicateKey, 3, 3),
        Case(bytes: [0x22, 0xFF, 0x22], .invalidUnicode, 2),
        Case(bytes: [0x22, 0xC0, 0xAF, 0x22], .invalidUnicode, 2),
        Case(bytes: [0x22, 0xED, 0xA0, 0x80, 0x22], .invalidUnicode, 2),
        Case(bytes: [0x22, 0xE2, 0x82, 0x22], .invalidUnicode, 2),
        Case(bytes: [0x22, 0xF4, 0x90, 0x80, 0x80, 0x22], .invalidUnicode, 2),
        Case(bytes: [0x22, 0xF0, 0x9F, 0x98], .invalidUnicode, 2),
        Case(bytes: [0xEF, 0xBB, 0xBF, 0x31], .unexpectedCharacter, 1),
        Case(bytes: [0x31, 0x00], .trailingData, 2),
    ]

    @Test("every invalid document in the table is rejected with its code, line and column", arguments: cases)
    func rejectsInvalidDocument(_ c: Case) {
        let error = parseError(c.input)
        #expect(error?.code == c.code)
        #expect(error?.line == c.line)
        #expect(error?.column == c.column)
    }

    @Test("a duplicate key error names the key")
    func duplicateKeyNamesKey() {
        let error = parseError("{\"name\":1,\"other\":2,\"name\":3}")
        #expect(error?.message == "duplicate key \"name\"")
        #expect(error?.description == "line 1, column 21: duplicate key \"name\"")
    }

    @Test("duplicate keys are caught in large (indexed) objects too")
    func duplicateKeyInLargeObject() {
        let members = (0..<100).map { "\"k\($0)\":\($0)" }.joined(separator: ",")
        #expect(parseError("{\(members),\"k57\":0}")?.code == .duplicateKey)
    }

    @Test("the same key in sibling objects is not a duplicate")
    func sameKeyInSiblings() throws {
        #expect(try JSONValue.parse("[{\"a\":1},{\"a\":2}]") == [["a": 1], ["a": 2]])
        #expect(try JSONValue.parse("{\"a\":{\"a\":1}}") == ["a": ["a": 1]])
    }

    @Test("error messages say what was expected and what was found")
    func messages() {
        #expect(parseError("[1 2]")?.message == "expected ',' or ']' but found '2'")
        #expect(parseError("01")?.message == "leading zeros are not allowed in numbers")
        #expect(parseError("[1,]")?.message == "trailing comma before ']'")
        #expect(
            parseError("\"\\ud800\"")?.message
                == "lone surrogate \\uD800: a high surrogate must be followed by a low one")
    }
}
