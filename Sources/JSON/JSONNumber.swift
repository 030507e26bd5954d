/// A JSON number: its `Double` value plus the literal text it came from.
///
/// Parsed numbers keep their literal verbatim (and serialize it unchanged);
/// numbers built from a `Double` or an integer get a canonical literal.
public struct JSONNumber: Sendable, Hashable, CustomStringConvertible {
    /// The nearest `Double` to the literal.
    public let double: Double
    /// The JSON literal ("42", "1.5e3"); "null" for a non-finite double.
    public let text: String

    /// Trusts `text` to be a valid JSON number literal for `double`; the parser's entry.
    init(text: String, double: Double) {
        self.text = text
        self.double = double
    }

    /// A number from a `Double`; integral values print without ".0", non-finite ones as `null`.
    public init(_ value: Double) {
        double = value
        if !value.isFinite {
            text = "null"
        } else if value == value.rounded(.towardZero), abs(value) < 1e18 {
            text = String(Int64(value))
        } else {
            // Swift's description is the shortest round-trip form and valid JSON ("1e+20").
            text = value.description
        }
    }

    /// An exact integer.
    public init(_ value: Int64) {
        double = Double(value)
        text = String(value)
    }

    /// An exact integer.
    public init(_ value: Int) {
        self.init(Int64(value))
    }

    /// The literal's exact value when it is an integer that fits `Int64` ("1e3" is 1000, "1.5" is nil).
    public var int64: Int64? { JSONNumber.exactInteger(text) }

    /// The literal text.
    public var description: String { text }

    /// Equal doubles are equal numbers, except that two integer literals compare exactly.
    public static func == (a: JSONNumber, b: JSONNumber) -> Bool {
        if a.text == b.text { return true }
        if let x = a.int64, let y = b.int64 { return x == y }
        return a.double == b.double
    }

    /// Hashes the double, consistent with `==` for all values that are equal.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(double)
    }
}

extension JSONNumber {
    /// Decides integrality on the decimal literal itself, so no precision is lost to `Double`.
    static func exactInteger(_ text: String) -> Int64? {
        var utf8 = Array(text.utf8)
        let negative = utf8.first == UInt8(ascii: "-")
        if negative { utf8.removeFirst() }
        var digits: [UInt8] = []
        var exponent = 0
        var i = 0
        while i < utf8.count, utf8[i] >= 0x30, utf8[i] <= 0x39 { digits.append(utf8[i]); i += 1 }
        if i < utf8.count, utf8[i] == UInt8(ascii: ".") {
            i += 1
            while i < utf8.count, utf8[i] >= 0x30, utf8[i] <= 0x39 {
                digits.append(utf8[i]); exponent -= 1; i += 1
            }
        }
        if i < utf8.count, utf8[i] | 0x20 == UInt8(ascii: "e") {
            i += 1
            var sign = 1
            if i < utf8.count, utf8[i] == UInt8(ascii: "-") || utf8[i] == UInt8(ascii: "+") {
                if utf8[i] == UInt8(ascii: "-") { sign = -1 }
                i += 1
            }
            var e = 0
            while i < utf8.count, utf8[i] >= 0x30, utf8[i] <= 0x39 {
                // Beyond a million the value is either zero or far outside Int64 anyway.
                if e < 1_000_000 { e = e * 10 + Int(utf8[i] - 0x30) }
                i += 1
            }
            exponent += sign * e
        }
        guard i == utf8.count, !digits.isEmpty else { return nil }
        while let first = digits.first, first == 0x30 { digits.removeFirst() }
        if digits.isEmpty { return 0 }
        while let last = digits.last, last == 0x30 { digits.removeLast(); exponent += 1 }
        guard exponent >= 0, digits.count + exponent <= 19 else { return nil }
        // Accumulate as a negative number so Int64.min fits.
        var value: Int64 = 0
        for d in digits + [UInt8](repeating: 0x30, count: exponent) {
            let (m, o1) = value.multipliedReportingOverflow(by: 10)
            let (s, o2) = m.subtractingReportingOverflow(Int64(d - 0x30))
            if o1 || o2 { return nil }
            value = s
        }
        if negative { return value }
        return value == .min ? nil : -value
    }
}
