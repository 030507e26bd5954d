/// Byte classes of RFC 9110 §5.6 as bit masks: bytes 0–63 and 64–127 in two words, one answer for
/// 128–255. A shift and a test per byte on the hot path: no table behind a lazy global, no bounds
/// check (docs/performance.md, "Strings and bytes"). Each is checked against its RFC definition
/// for all 256 bytes.
public enum ByteClass {
    @inlinable @inline(__always)
    static func contains(_ b: UInt8, _ low: UInt64, _ high: UInt64, upper: Bool) -> Bool {
        if b < 64 { return (low >> UInt64(b)) & 1 == 1 }
        if b < 128 { return (high >> UInt64(b &- 64)) & 1 == 1 }
        return upper
    }

    /// tchar: "!" / "#" / "$" / "%" / "&" / "'" / "*" / "+" / "-" / "." / "^" / "_" / "`" / "|" / "~" / DIGIT / ALPHA
    @inlinable @inline(__always)
    public static func isToken(_ b: UInt8) -> Bool {
        contains(b, 0x03FF_6CFA_0000_0000, 0x57FF_FFFF_C7FF_FFFE, upper: false)
    }

    /// Allowed in a field value: HTAB, SP, VCHAR and obs-text (no other controls, no DEL).
    @inlinable @inline(__always)
    public static func isFieldValue(_ b: UInt8) -> Bool {
        contains(b, 0xFFFF_FFFF_0000_0200, 0x7FFF_FFFF_FFFF_FFFF, upper: true)
    }

    /// Allowed in a request target: visible ASCII except the fragment mark.
    @inlinable @inline(__always)
    public static func isTarget(_ b: UInt8) -> Bool {
        contains(b, 0xFFFF_FFF6_0000_0000, 0x7FFF_FFFF_FFFF_FFFF, upper: false)
    }

    /// Allowed in Host's reg-name or IP literal (unreserved, pct-encoded, sub-delims minus ",",
    /// and ":", "[", "]").
    @inlinable @inline(__always)
    public static func isHost(_ b: UInt8) -> Bool {
        contains(b, 0x2FFF_6FF2_0000_0000, 0x47FF_FFFE_AFFF_FFFE, upper: false)
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

/// Scans for the bytes a parser stops at.
public enum ByteScan {
    /// The index of the first byte below 0x0E (CR, LF and the other controls) at or after `from`,
    /// or `bytes.count`: eight bytes per step while none is there (a test per word, from "Bit
    /// Twiddling Hacks", `hasless`: exact for any word, so no byte below 0x0E is ever skipped).
    @inlinable
    public static func nextControlByte(_ bytes: UnsafeBufferPointer<UInt8>, from: Int) -> Int {
        firstStop(
            bytes, from: from, word: { ($0 &- 0x0E0E_0E0E_0E0E_0E0E) & ~$0 & 0x8080_8080_8080_8080 != 0 },
            byte: { $0 < 0x0E })
    }

    /// The index of the first byte at or after `from` that may not be in a request target
    /// (`ByteClass.isTarget` false: a control, space, `#`, DEL or above), or `bytes.count`: eight
    /// bytes per step while all may. The word test is exact: a byte below 0x21 (`hasless`),
    /// above 0x7E (the high bit, or 0x7F plus one: no byte below 0x80 carries into its
    /// neighbour), or equal to `#` (a zero byte after XOR) stops the step, and the byte loop
    /// finds which.
    @inlinable
    public static func nextNonTargetByte(_ bytes: UnsafeBufferPointer<UInt8>, from: Int) -> Int {
        // Literals, not globals: a static in another module is read through its accessor.
        let ones: UInt64 = 0x0101_0101_0101_0101, highs: UInt64 = 0x8080_8080_8080_8080
        return firstStop(
            bytes, from: from,
            word: { word in
                let below = (word &- ones &* 0x21) & ~word
                let above = (word &+ ones) | word
                let hash = word ^ (ones &* 0x23)
                return (below | above | (hash &- ones) & ~hash) & highs != 0
            }, byte: { !ByteClass.isTarget($0) })
    }

    /// The index of the first byte at or after `from` that may not be in a field value
    /// (`ByteClass.isFieldValue` false: a control other than HTAB, or DEL), or `bytes.count`:
    /// eight bytes per step while none is below 0x20 or DEL (`hasless`, and a zero byte after
    /// XOR with 0x7F; both exact for the first such byte of a word); a tab is taken by the byte loop.
    @inlinable
    public static func nextNonFieldValueByte(_ bytes: UnsafeBufferPointer<UInt8>, from: Int) -> Int {
        let ones: UInt64 = 0x0101_0101_0101_0101, highs: UInt64 = 0x8080_8080_8080_8080
        return firstStop(
            bytes, from: from,
            word: { word in
                let control = (word &- ones &* 0x20) & ~word
                let del = word ^ (ones &* 0x7F)
                return (control | (del &- ones) & ~del) & highs != 0
            }, byte: { !ByteClass.isFieldValue($0) })
    }

    /// The first index at or after `from` where `byte` holds: whole words are skipped while
    /// `word` says none of their eight bytes can (it must never miss one), then byte by byte.
    @inlinable @inline(__always)
    static func firstStop(_ bytes: UnsafeBufferPointer<UInt8>, from: Int, word: (UInt64) -> Bool, byte: (UInt8) -> Bool)
        -> Int
    {
        var i = from
        let count = bytes.count
        if let base = bytes.baseAddress {
            let raw = UnsafeRawPointer(base)
            while i + 8 <= count {
                if word((raw + i).loadUnaligned(as: UInt64.self)) { break }
                i += 8
            }
        }
        while i < count && !byte(bytes[i]) { i += 1 }
        return i
    }
}
