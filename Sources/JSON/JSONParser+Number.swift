/// Number parsing: the RFC 8259 grammar checked byte by byte, the value by the standard library.
extension JSONParser {
    mutating func parseNumber() throws(JSONParseError) -> JSONNumber {
        let start = pos
        if bytes[pos] == UInt8(ascii: "-") { pos += 1 }
        let intStart = pos
        guard let first = peek(), isDigit(first) else {
            throw digitExpected("expected a digit after '-'")
        }
        pos += 1
        if first == UInt8(ascii: "0") {
            if let next = peek(), isDigit(next) {
                throw error(.invalidNumber, "leading zeros are not allowed in numbers", at: intStart)
            }
        } else {
            skipDigits()
        }
        var isInteger = true
        if peek() == UInt8(ascii: ".") {
            isInteger = false
            pos += 1
            guard let d = peek(), isDigit(d) else { throw digitExpected("expected a digit after the decimal point") }
            skipDigits()
        }
        if let e = peek(), e | 0x20 == UInt8(ascii: "e") {
            isInteger = false
            pos += 1
            if let sign = peek(), sign == UInt8(ascii: "+") || sign == UInt8(ascii: "-") { pos += 1 }
            guard let d = peek(), isDigit(d) else { throw digitExpected("expected a digit in the exponent") }
            skipDigits()
        }
        let literal = UnsafeRawBufferPointer(rebasing: bytes[start..<pos])
        let text = String(decoding: literal, as: UTF8.self)
        // Up to 15 digits an integer is exact in a Double; skip the general conversion.
        if isInteger, pos - intStart <= 15 {
            var magnitude: Int64 = 0
            for i in intStart..<pos { magnitude = magnitude * 10 + Int64(bytes[i] - UInt8(ascii: "0")) }
            let double = Double(magnitude)
            return JSONNumber(text: text, double: start == intStart ? double : -double)
        }
        guard let double = Double(text), double.isFinite else {
            throw error(.numberOutOfRange, "number \(text.prefix(40)) is too large", at: start)
        }
        return JSONNumber(text: text, double: double)
    }

    private mutating func skipDigits() {
        while let d = peek(), isDigit(d) { pos += 1 }
    }

    private func isDigit(_ b: UInt8) -> Bool {
        b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9")
    }

    private func digitExpected(_ message: String) -> JSONParseError {
        error(pos < bytes.count ? .invalidNumber : .unexpectedEnd, message, at: pos)
    }
}
