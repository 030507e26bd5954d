/// A strict, iterative RFC 8259 parser over raw bytes.
///
/// Containers live on an explicit stack rather than the call stack, so depth
/// is bounded by `maxDepth` alone and deep input cannot overflow a thread's stack.
struct JSONParser {
    let bytes: UnsafeRawBufferPointer
    let maxDepth: Int
    var pos = 0
    /// Reused buffer for strings with escapes, so decoding never appends to a String byte by byte.
    var scratch: [UInt8] = []

    private struct Container {
        var items: [JSONValue] = []
        var object: JSONObject?
        var key = ""
    }

    init(bytes: UnsafeRawBufferPointer, maxDepth: Int) {
        self.bytes = bytes
        self.maxDepth = maxDepth
    }

    mutating func parseDocument() throws(JSONParseError) -> JSONValue {
        if bytes.count >= 3, bytes[0] == 0xEF, bytes[1] == 0xBB, bytes[2] == 0xBF {
            throw error(.unexpectedCharacter, "a byte order mark is not allowed", at: 0)
        }
        var stack: [Container] = []
        var value: JSONValue
        nextValue: while true {
            skipWhitespace()
            guard pos < bytes.count else { throw endOfInput() }
            switch bytes[pos] {
            case UInt8(ascii: "["):
                guard stack.count < maxDepth else { throw tooDeep() }
                pos += 1
                skipWhitespace()
                if peek() == UInt8(ascii: "]") {
                    pos += 1
                    value = .array([])
                } else {
                    stack.append(Container())
                    continue nextValue
                }
            case UInt8(ascii: "{"):
                guard stack.count < maxDepth else { throw tooDeep() }
                pos += 1
                skipWhitespace()
                if peek() == UInt8(ascii: "}") {
                    pos += 1
                    value = .object(JSONObject())
                } else {
                    let object = JSONObject()
                    let key = try parseKey(checkingAgainst: object)
                    stack.append(Container(object: object, key: key))
                    continue nextValue
                }
            case UInt8(ascii: "\""):
                pos += 1
                value = .string(try parseString())
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                value = .number(try parseNumber())
            case UInt8(ascii: "t"):
                try expectLiteral("true")
                value = .bool(true)
            case UInt8(ascii: "f"):
                try expectLiteral("false")
                value = .bool(false)
            case UInt8(ascii: "n"):
                try expectLiteral("null")
                value = .null
            default:
                throw unexpected("expected a value")
            }
            // Attach the finished value to its container, closing every container that ends here.
            while !stack.isEmpty {
                let top = stack.count - 1
                skipWhitespace()
                guard pos < bytes.count else { throw endOfInput() }
                if stack[top].object == nil {
                    stack[top].items.append(value)
                    switch bytes[pos] {
                    case UInt8(ascii: ","):
                        pos += 1
                        try rejectTrailingComma(before: UInt8(ascii: "]"))
                        continue nextValue
                    case UInt8(ascii: "]"):
                        pos += 1
                        value = .array(stack.removeLast().items)
                    default:
                        throw unexpected("expected ',' or ']'")
                    }
                } else {
                    stack[top].object!.appendUnchecked(stack[top].key, value)
                    switch bytes[pos] {
                    case UInt8(ascii: ","):
                        pos += 1
                        try rejectTrailingComma(before: UInt8(ascii: "}"))
                        stack[top].key = try parseKey(checkingAgainst: stack[top].object!)
                        continue nextValue
                    case UInt8(ascii: "}"):
                        pos += 1
                        value = .object(stack.removeLast().object!)
                    default:
                        throw unexpected("expected ',' or '}'")
                    }
                }
            }
            skipWhitespace()
            guard pos == bytes.count else {
                throw error(.trailingData, "unexpected data after the JSON value", at: pos)
            }
            return value
        }
    }

    /// Reads `"key"` and the colon after it; a key already in `object` is an error at the key.
    private mutating func parseKey(checkingAgainst object: JSONObject) throws(JSONParseError) -> String {
        skipWhitespace()
        guard peek() == UInt8(ascii: "\"") else {
            throw pos < bytes.count ? unexpected("expected a string key") : endOfInput()
        }
        let keyStart = pos
        pos += 1
        let key = try parseString()
        if object.contains(key) {
            throw error(.duplicateKey, "duplicate key \"\(key)\"", at: keyStart)
        }
        skipWhitespace()
        guard peek() == UInt8(ascii: ":") else {
            throw pos < bytes.count ? unexpected("expected ':' after the key") : endOfInput()
        }
        pos += 1
        return key
    }

    private mutating func rejectTrailingComma(before closer: UInt8) throws(JSONParseError) {
        skipWhitespace()
        if peek() == closer {
            throw error(.trailingComma, "trailing comma before '\(Character(Unicode.Scalar(closer)))'", at: pos)
        }
    }

    private mutating func expectLiteral(_ word: StaticString) throws(JSONParseError) {
        let count = word.utf8CodeUnitCount
        let matches =
            pos + count <= bytes.count
            && (0..<count).allSatisfy { bytes[pos + $0] == word.utf8Start[$0] }
        guard matches else {
            throw error(.invalidLiteral, "invalid literal; expected true, false or null", at: pos)
        }
        pos += count
    }

    mutating func skipWhitespace() {
        while pos < bytes.count {
            switch bytes[pos] {
            case 0x20, 0x09, 0x0A, 0x0D: pos += 1
            default: return
            }
        }
    }

    func peek() -> UInt8? { pos < bytes.count ? bytes[pos] : nil }
}
