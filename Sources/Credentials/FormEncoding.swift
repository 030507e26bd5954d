/// `application/x-www-form-urlencoded` bodies for token requests, and query strings for
/// the OAuth callback.
public enum FormEncoding {
    /// `k=v&k2=v2` with every name and value percent-encoded. Spaces become `%20`, not `+`:
    /// both decode to a space in a form body, and `%20` also survives servers that
    /// percent-decode without the form rules.
    public static func encode(_ pairs: [(String, String)]) -> String {
        pairs.map { percentEncode($0.0) + "=" + percentEncode($0.1) }.joined(separator: "&")
    }

    /// `s` with everything but RFC 3986 unreserved characters (`A-Z a-z 0-9 - . _ ~`)
    /// as uppercase `%XX` of its UTF-8 bytes.
    public static func percentEncode(_ s: String) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(s.utf8.count)
        for byte in s.utf8 {
            if isUnreserved(byte) {
                out.append(byte)
            } else {
                out.append(UInt8(ascii: "%"))
                out.append(hexDigits[Int(byte >> 4)])
                out.append(hexDigits[Int(byte & 0x0F)])
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The name/value pairs of a query string (without its `?`), in order: `+` is a space,
    /// `%XX` is decoded, a malformed `%` is kept literally (as WHATWG URL parsing does),
    /// invalid UTF-8 becomes U+FFFD, a pair without `=` has an empty value.
    public static func decodeQuery(_ query: Substring) -> [(String, String)] {
        query.utf8.split(separator: UInt8(ascii: "&")).map { pair in
            if let equals = pair.firstIndex(of: UInt8(ascii: "=")) {
                return (decode(pair[..<equals]), decode(pair[pair.index(after: equals)...]))
            }
            return (decode(pair[...]), "")
        }
    }

    private static let hexDigits = Array("0123456789ABCDEF".utf8)

    private static func isUnreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"),
            UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
            true
        default:
            false
        }
    }

    private static func decode(_ component: Substring.UTF8View.SubSequence) -> String {
        let bytes = Array(component)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var i = 0
        while i < bytes.count {
            let byte = bytes[i]
            if byte == UInt8(ascii: "%"), i + 2 < bytes.count, let high = hexValue(bytes[i + 1]),
                let low = hexValue(bytes[i + 2])
            {
                out.append(high << 4 | low)
                i += 3
            } else {
                out.append(byte == UInt8(ascii: "+") ? UInt8(ascii: " ") : byte)
                i += 1
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        default: nil
        }
    }
}
