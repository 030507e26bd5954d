/// Error construction: positions are computed only when an error is thrown.
extension JSONParser {
    func error(_ code: JSONParseError.Code, _ message: String, at offset: Int) -> JSONParseError {
        var line = 1
        var column = 1
        for i in 0..<min(offset, bytes.count) {
            let b = bytes[i]
            if b == 0x0A {
                line += 1
                column = 1
            } else if b & 0xC0 != 0x80 {
                column += 1
            }
        }
        return JSONParseError(code: code, message: message, line: line, column: column, offset: offset)
    }

    func endOfInput() -> JSONParseError {
        error(.unexpectedEnd, "unexpected end of input", at: bytes.count)
    }

    func tooDeep() -> JSONParseError {
        error(.tooDeep, "arrays and objects are nested deeper than \(maxDepth) levels", at: pos)
    }

    /// "expected X but found 'y'" for the byte at `pos`.
    func unexpected(_ expectation: String) -> JSONParseError {
        guard pos < bytes.count else { return endOfInput() }
        return error(.unexpectedCharacter, "\(expectation) but found \(JSONParser.describe(bytes[pos]))", at: pos)
    }

    static func describe(_ byte: UInt8) -> String {
        if byte >= 0x21, byte < 0x7F { return "'\(Character(Unicode.Scalar(byte)))'" }
        return "byte 0x\(hex2(byte))"
    }

    static func hex2(_ byte: UInt8) -> String {
        let digits = Array("0123456789ABCDEF")
        return String([digits[Int(byte >> 4)], digits[Int(byte & 0xF)]])
    }
}
