/// Compact serialization and escaping helpers for hand-built JSON.
extension JSONValue {
    /// Compact JSON text: no whitespace, object members in order, parsed numbers as written.
    public func serialized() -> String {
        String(decoding: serializedBytes(), as: UTF8.self)
    }

    /// Compact JSON as UTF-8 bytes.
    public func serializedBytes() -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(64)
        JSONSerializer.write(self, into: &out)
        return out
    }
}

/// The string's contents escaped for a JSON string literal, without the surrounding quotes.
public func jsonEscaped(_ s: String) -> String {
    // Most strings (codes, paths, ids) need no escaping: return them untouched.
    let plain =
        s.utf8.withContiguousStorageIfAvailable { !JSONSerializer.anyNeedsEscape($0) }
        ?? !s.utf8.contains(where: JSONSerializer.needsEscape)
    guard !plain else { return s }
    var out: [UInt8] = []
    out.reserveCapacity(s.utf8.count + 8)
    JSONSerializer.appendEscaped(s, into: &out)
    return String(decoding: out, as: UTF8.self)
}

/// Whether any of `bytes` must be escaped in a JSON string (a control byte, `"` or `\`), eight
/// bytes per step.
public func jsonNeedsEscaping(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool { JSONSerializer.anyNeedsEscape(bytes) }

/// `bytes` escaped for a JSON string, one byte at a time to `emit` (the path for the rare
/// string that needs it).
public func jsonEscape(_ bytes: UnsafeBufferPointer<UInt8>, _ emit: (UInt8) -> Void) {
    for b in bytes { JSONSerializer.escape(b, emit) }
}

/// The string as a complete JSON string literal, quotes included.
public func jsonQuoted(_ s: String) -> String {
    "\"" + jsonEscaped(s) + "\""
}

enum JSONSerializer {
    static func write(_ value: JSONValue, into out: inout [UInt8]) {
        switch value {
        case .null:
            out.append(contentsOf: "null".utf8)
        case .bool(let b):
            out.append(contentsOf: (b ? "true" : "false").utf8)
        case .number(let n):
            out.append(contentsOf: n.text.utf8)
        case .string(let s):
            out.append(UInt8(ascii: "\""))
            appendEscaped(s, into: &out)
            out.append(UInt8(ascii: "\""))
        case .array(let items):
            out.append(UInt8(ascii: "["))
            for (i, item) in items.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                write(item, into: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let object):
            out.append(UInt8(ascii: "{"))
            var first = true
            for (key, member) in object {
                if !first { out.append(UInt8(ascii: ",")) }
                first = false
                out.append(UInt8(ascii: "\""))
                appendEscaped(key, into: &out)
                out.append(contentsOf: "\":".utf8)
                write(member, into: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    @inline(__always)
    static func needsEscape(_ b: UInt8) -> Bool {
        b < 0x20 || b == UInt8(ascii: "\"") || b == UInt8(ascii: "\\")
    }

    /// Whether any byte needs escaping, eight bytes per step: a byte below 0x20 (`hasless`) or
    /// equal to a quote or a backslash (a zero byte after XOR) marks its word, exactly.
    static func anyNeedsEscape(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        var i = 0
        if let base = bytes.baseAddress {
            let raw = UnsafeRawPointer(base)
            let ones: UInt64 = 0x0101_0101_0101_0101
            @inline(__always) func hasZeroByte(_ x: UInt64) -> Bool { (x &- ones) & ~x & 0x8080_8080_8080_8080 != 0 }
            while i + 8 <= bytes.count {
                let word = raw.loadUnaligned(fromByteOffset: i, as: UInt64.self)
                if (word &- ones &* 0x20) & ~word & 0x8080_8080_8080_8080 != 0 || hasZeroByte(word ^ (ones &* 0x22))
                    || hasZeroByte(word ^ (ones &* 0x5C))
                {
                    return true
                }
                i += 8
            }
        }
        while i < bytes.count {
            if needsEscape(bytes[i]) { return true }
            i += 1
        }
        return false
    }

    /// Escapes quote, backslash and control characters; everything else is copied as UTF-8.
    static func appendEscaped(_ s: String, into out: inout [UInt8]) {
        for b in s.utf8 { escape(b) { out.append($0) } }
    }

    /// `b` as it stands in a JSON string, one byte at a time to `emit`.
    @inline(__always)
    static func escape(_ b: UInt8, _ emit: (UInt8) -> Void) {
        guard needsEscape(b) else { return emit(b) }
        emit(UInt8(ascii: "\\"))
        switch b {
        case UInt8(ascii: "\""): emit(UInt8(ascii: "\""))
        case UInt8(ascii: "\\"): emit(UInt8(ascii: "\\"))
        case 0x08: emit(UInt8(ascii: "b"))
        case 0x0C: emit(UInt8(ascii: "f"))
        case 0x0A: emit(UInt8(ascii: "n"))
        case 0x0D: emit(UInt8(ascii: "r"))
        case 0x09: emit(UInt8(ascii: "t"))
        default: for c in ("u00" + JSONParser.hex2(b).lowercased()).utf8 { emit(c) }
        }
    }
}
