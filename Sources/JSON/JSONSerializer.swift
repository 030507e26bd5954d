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
    guard s.utf8.contains(where: JSONSerializer.needsEscape) else { return s }
    var out: [UInt8] = []
    out.reserveCapacity(s.utf8.count + 8)
    JSONSerializer.appendEscaped(s, into: &out)
    return String(decoding: out, as: UTF8.self)
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

    /// Escapes quote, backslash and control characters; everything else is copied as UTF-8.
    static func appendEscaped(_ s: String, into out: inout [UInt8]) {
        for b in s.utf8 {
            guard needsEscape(b) else {
                out.append(b)
                continue
            }
            out.append(UInt8(ascii: "\\"))
            switch b {
            case UInt8(ascii: "\""): out.append(UInt8(ascii: "\""))
            case UInt8(ascii: "\\"): out.append(UInt8(ascii: "\\"))
            case 0x08: out.append(UInt8(ascii: "b"))
            case 0x0C: out.append(UInt8(ascii: "f"))
            case 0x0A: out.append(UInt8(ascii: "n"))
            case 0x0D: out.append(UInt8(ascii: "r"))
            case 0x09: out.append(UInt8(ascii: "t"))
            default: out.append(contentsOf: ("u00" + JSONParser.hex2(b).lowercased()).utf8)
            }
        }
    }
}
