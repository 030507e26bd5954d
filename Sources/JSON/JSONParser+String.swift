/// String decoding: a copy-free fast path when there are no escapes, a reused byte buffer otherwise.
extension JSONParser {
    /// Parses from just after the opening quote through the closing quote.
    mutating func parseString() throws(JSONParseError) -> String {
        let start = pos
        var i = pos
        while true {
            guard i < bytes.count else { throw unterminated(from: start) }
            let b = bytes[i]
            if b == UInt8(ascii: "\"") {
                pos = i + 1
                return String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<i]), as: UTF8.self)
            }
            if b == UInt8(ascii: "\\") { break }
            i = try advance(over: b, at: i)
        }
        scratch.removeAll(keepingCapacity: true)
        var runStart = start
        while true {
            guard i < bytes.count else { throw unterminated(from: start) }
            let b = bytes[i]
            if b == UInt8(ascii: "\"") {
                scratch.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[runStart..<i]))
                pos = i + 1
                return String(decoding: scratch, as: UTF8.self)
            }
            if b == UInt8(ascii: "\\") {
                scratch.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[runStart..<i]))
                i = try decodeEscape(at: i, from: start)
                runStart = i
            } else {
                i = try advance(over: b, at: i)
            }
        }
    }

    /// Steps over one unescaped character, rejecting control bytes and malformed UTF-8.
    private func advance(over b: UInt8, at i: Int) throws(JSONParseError) -> Int {
        if b >= 0x20, b < 0x80 { return i + 1 }
        if b < 0x20 {
            throw error(.invalidString, "unescaped control character U+00\(JSONParser.hex2(b)) in a string", at: i)
        }
        return try validateUTF8(at: i)
    }

    /// Returns the index after a well-formed UTF-8 sequence (Unicode Table 3-7) starting at `i`.
    private func validateUTF8(at i: Int) throws(JSONParseError) -> Int {
        let lead = bytes[i]
        let length: Int
        var low: UInt8 = 0x80
        var high: UInt8 = 0xBF
        switch lead {
        case 0xC2...0xDF: length = 2
        case 0xE0: length = 3; low = 0xA0
        case 0xE1...0xEC, 0xEE...0xEF: length = 3
        case 0xED: length = 3; high = 0x9F
        case 0xF0: length = 4; low = 0x90
        case 0xF1...0xF3: length = 4
        case 0xF4: length = 4; high = 0x8F
        default: throw invalidUTF8(at: i)
        }
        guard i + length <= bytes.count else { throw invalidUTF8(at: i) }
        let second = bytes[i + 1]
        guard second >= low, second <= high else { throw invalidUTF8(at: i) }
        for k in 2..<length where bytes[i + k] & 0xC0 != 0x80 { throw invalidUTF8(at: i) }
        return i + length
    }

    /// Decodes the escape whose backslash is at `i` into `scratch`; returns the index after it.
    private mutating func decodeEscape(at i: Int, from start: Int) throws(JSONParseError) -> Int {
        guard i + 1 < bytes.count else { throw unterminated(from: start) }
        let replacement: UInt8
        switch bytes[i + 1] {
        case UInt8(ascii: "\""): replacement = 0x22
        case UInt8(ascii: "\\"): replacement = 0x5C
        case UInt8(ascii: "/"): replacement = 0x2F
        case UInt8(ascii: "b"): replacement = 0x08
        case UInt8(ascii: "f"): replacement = 0x0C
        case UInt8(ascii: "n"): replacement = 0x0A
        case UInt8(ascii: "r"): replacement = 0x0D
        case UInt8(ascii: "t"): replacement = 0x09
        case UInt8(ascii: "u"): return try decodeUnicodeEscape(at: i)
        default:
            throw error(.invalidEscape, "invalid escape \\\(JSONParser.describe(bytes[i + 1])) in a string", at: i)
        }
        scratch.append(replacement)
        return i + 2
    }

    /// `\uXXXX`, joining a surrogate pair into one scalar; lone surrogates are errors.
    private mutating func decodeUnicodeEscape(at i: Int) throws(JSONParseError) -> Int {
        let unit = try hex4(at: i + 2, escapeAt: i)
        var scalarValue = UInt32(unit)
        var next = i + 6
        switch unit {
        case 0xD800...0xDBFF:
            let pairs =
                next + 1 < bytes.count && bytes[next] == UInt8(ascii: "\\") && bytes[next + 1] == UInt8(ascii: "u")
            let low = pairs ? try hex4(at: next + 2, escapeAt: next) : 0
            guard (0xDC00...0xDFFF).contains(low) else {
                throw error(
                    .invalidUnicode,
                    "lone surrogate \\u\(JSONParser.hex4String(unit)): a high surrogate must be followed by a low one",
                    at: i)
            }
            scalarValue = 0x10000 + ((UInt32(unit) - 0xD800) << 10) + (UInt32(low) - 0xDC00)
            next += 6
        case 0xDC00...0xDFFF:
            throw error(
                .invalidUnicode,
                "lone surrogate \\u\(JSONParser.hex4String(unit)): a low surrogate must follow a high one", at: i)
        default:
            break
        }
        // Every value left here is a valid scalar: surrogates were handled above.
        let scalar = Unicode.Scalar(scalarValue)!
        UTF8.encode(scalar) { scratch.append($0) }
        return next
    }

    private func hex4(at j: Int, escapeAt i: Int) throws(JSONParseError) -> UInt16 {
        guard j + 4 <= bytes.count else {
            throw error(.invalidEscape, "\\u must be followed by four hex digits", at: i)
        }
        var value: UInt16 = 0
        for k in j..<(j + 4) {
            let b = bytes[k]
            let digit: UInt8
            switch b {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = b - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = b - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = b - UInt8(ascii: "A") + 10
            default: throw error(.invalidEscape, "\\u must be followed by four hex digits", at: i)
            }
            value = value << 4 | UInt16(digit)
        }
        return value
    }

    private func unterminated(from start: Int) -> JSONParseError {
        error(.invalidString, "unterminated string", at: start - 1)
    }

    private func invalidUTF8(at i: Int) -> JSONParseError {
        error(.invalidUnicode, "invalid UTF-8 byte 0x\(JSONParser.hex2(bytes[i])) in a string", at: i)
    }

    static func hex4String(_ unit: UInt16) -> String {
        hex2(UInt8(unit >> 8)) + hex2(UInt8(unit & 0xFF))
    }
}
