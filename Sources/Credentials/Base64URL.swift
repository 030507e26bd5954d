/// Base64url (RFC 4648 §5), the encoding of PKCE verifiers, `state` values and JWT segments.
public enum Base64URL {
    /// The unpadded base64url text of `bytes` (RFC 7636 and RFC 7515 both drop the padding).
    public static func encode(_ bytes: some Collection<UInt8>) -> String {
        Base64Codec.encode(bytes, alphabet: Base64Codec.urlAlphabet, pad: false)
    }

    /// The bytes of base64url `text`, padded or not; nil for characters outside the
    /// alphabet, misplaced or partial padding, or an impossible length.
    public static func decode(_ text: some StringProtocol) -> [UInt8]? {
        Base64Codec.decode(Array(text.utf8))
    }
}

/// Standard base64 (RFC 4648 §4), padded: what HTTP Basic authentication (RFC 7617) expects.
public enum Base64 {
    /// The padded base64 text of `bytes`.
    public static func encode(_ bytes: some Collection<UInt8>) -> String {
        Base64Codec.encode(bytes, alphabet: Base64Codec.standardAlphabet, pad: true)
    }
}

enum Base64Codec {
    static let standardAlphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
    static let urlAlphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// The 6-bit value of each base64url character; 0xFF marks the rest.
    private static let urlValues: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (value, character) in urlAlphabet.enumerated() { table[Int(character)] = UInt8(value) }
        return table
    }()

    static func encode(_ bytes: some Collection<UInt8>, alphabet: [UInt8], pad: Bool) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var iterator = bytes.makeIterator()
        while let b0 = iterator.next() {
            let b1 = iterator.next(), b2 = iterator.next()
            let group = UInt32(b0) << 16 | UInt32(b1 ?? 0) << 8 | UInt32(b2 ?? 0)
            out.append(alphabet[Int(group >> 18 & 63)])
            out.append(alphabet[Int(group >> 12 & 63)])
            if b1 != nil { out.append(alphabet[Int(group >> 6 & 63)]) } else if pad { out.append(UInt8(ascii: "=")) }
            if b2 != nil { out.append(alphabet[Int(group & 63)]) } else if pad { out.append(UInt8(ascii: "=")) }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Decodes base64url. Non-zero bits left over in the last character are ignored
    /// (RFC 4648 §3.5 lets decoders choose), so any real-world encoder's output passes.
    static func decode(_ text: [UInt8]) -> [UInt8]? {
        var characters = text[...]
        if text.count % 4 == 0, text.last == UInt8(ascii: "=") {
            // Padding must complete the final quantum exactly: "Zg==" or "Zm8=", never "Zg=".
            characters = characters.dropLast()
            if characters.last == UInt8(ascii: "=") { characters = characters.dropLast() }
            guard characters.count % 4 >= 2 else { return nil }
        }
        // One character alone cannot carry a whole byte.
        guard characters.count % 4 != 1 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(characters.count * 3 / 4)
        var group: UInt32 = 0
        var filled = 0
        for character in characters {
            let value = urlValues[Int(character)]
            guard value != 0xFF else { return nil }
            group = group << 6 | UInt32(value)
            filled += 1
            if filled == 4 {
                out.append(UInt8(truncatingIfNeeded: group >> 16))
                out.append(UInt8(truncatingIfNeeded: group >> 8))
                out.append(UInt8(truncatingIfNeeded: group))
                group = 0
                filled = 0
            }
        }
        if filled == 2 {
            out.append(UInt8(truncatingIfNeeded: group >> 4))
        } else if filled == 3 {
            out.append(UInt8(truncatingIfNeeded: group >> 10))
            out.append(UInt8(truncatingIfNeeded: group >> 2))
        }
        return out
    }
}
