/// Byte classes of RFC 9110 §5.6 as lookup tables: one load per byte on the hot path.
enum ByteClass {
    /// tchar: "!" / "#" / "$" / "%" / "&" / "'" / "*" / "+" / "-" / "." / "^" / "_" / "`" / "|" / "~" / DIGIT / ALPHA
    static let token: [Bool] = (0..<256).map { b in
        switch UInt8(b) {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"):
            return true
        default:
            return "!#$%&'*+-.^_`|~".utf8.contains(UInt8(b))
        }
    }

    /// Bytes allowed in a field value: HTAB, SP, VCHAR and obs-text (no other controls, no DEL).
    static let fieldValue: [Bool] = (0..<256).map { (b: Int) in b == 0x09 || (b >= 0x20 && b != 0x7F) }

    /// Bytes allowed in a request target: visible ASCII except the fragment mark.
    static let target: [Bool] = (0..<256).map { (b: Int) in b > 0x20 && b < 0x7F && b != 0x23 }

    /// Bytes allowed in Host's reg-name or IP literal (unreserved, pct-encoded, sub-delims minus ",", ":", "[", "]").
    static let host: [Bool] = (0..<256).map { b in
        switch UInt8(b) {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"):
            return true
        default:
            return "-._~%!$&'()*+;=:[]".utf8.contains(UInt8(b))
        }
    }

    /// The value of a hex digit, or nil.
    @inline(__always)
    static func hexValue(_ b: UInt8) -> UInt64? {
        switch b {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): UInt64(b &- 0x30)
        case UInt8(ascii: "a")...UInt8(ascii: "f"): UInt64(b &- 0x57)
        case UInt8(ascii: "A")...UInt8(ascii: "F"): UInt64(b &- 0x37)
        default: nil
        }
    }
}

/// ASCII bytes the parser names.
extension UInt8 {
    static let cr: UInt8 = 0x0D
    static let lf: UInt8 = 0x0A
    static let space: UInt8 = 0x20
    static let tab: UInt8 = 0x09
    static let colon: UInt8 = 0x3A
    static let semicolon: UInt8 = 0x3B
    static let comma: UInt8 = 0x2C
}
