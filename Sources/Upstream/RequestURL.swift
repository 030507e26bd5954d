import Glibc
import HTTP1

/// An upstream request's absolute URL, held as the parts it is made of (`origin`, `path`,
/// `query`) and joined only where libcurl takes it, in a stack buffer: a forwarded request's URL
/// then costs no String of its own (libcurl copies the text it is given).
public struct RequestURL: Sendable, Equatable, CustomStringConvertible {
    /// `scheme://host[:port]`, or the whole URL when made from one string.
    public let origin: String
    /// The path (beginning with "/"), empty when `origin` is the whole URL.
    public let path: String
    /// The query after "?", without it.
    public let query: String?

    /// A URL given whole.
    public init(_ url: String) {
        origin = url
        path = ""
        query = nil
    }

    /// A URL from its parts: `origin + path` and `"?" + query` when there is one.
    public init(origin: String, path: String, query: String?) {
        self.origin = origin
        self.path = path
        self.query = query
    }

    /// The whole URL.
    public var description: String {
        var text = origin + path
        if let query { text += "?" + query }
        return text
    }

    /// Whether the scheme is https (the origin is lowercased by whoever parsed it; a whole URL
    /// given as one string is compared as given).
    var isHTTPS: Bool {
        origin.withUTF8Bytes { $0.count > 6 && memcmp($0.baseAddress!, "https:", 6) == 0 }
    }

    /// Whether libcurl sends `part` (a path, or a query without its `?`) byte for byte both when
    /// it parses it out of a URL string and when it is set as a part (`EasyHandle.setURL`): no
    /// byte the parse refuses (control bytes, space, DEL), none it splits at (`#`, and `?` in a
    /// path), and no percent-encoding with an upper-case hex digit, which setting a part
    /// lowercases.
    static func partIsVerbatim(_ part: String, query: Bool) -> Bool {
        var part = part
        return part.withUTF8 { bytes in
            var i = 0
            while i < bytes.count {
                let byte = bytes[i]
                if byte <= 0x20 || byte == 0x7F || byte == UInt8(ascii: "#") || (byte == UInt8(ascii: "?") && !query) {
                    return false
                }
                if byte == UInt8(ascii: "%"), i + 2 < bytes.count, isHexDigit(bytes[i + 1]), isHexDigit(bytes[i + 2]),
                    isUpperHex(bytes[i + 1]) || isUpperHex(bytes[i + 2])
                {
                    return false
                }
                i += 1
            }
            return true
        }
    }

    private static func isHexDigit(_ byte: UInt8) -> Bool {
        byte &- 0x30 < 10 || (byte | 0x20) &- 0x61 < 6
    }

    private static func isUpperHex(_ byte: UInt8) -> Bool { byte &- 0x41 < 6 }

    /// Runs `body` with the URL as a NUL-terminated C string, joined on the stack (or in a
    /// temporary allocation when long).
    func withCString<Result>(_ body: (UnsafePointer<CChar>) -> Result) -> Result {
        let length = origin.utf8.count + path.utf8.count + (query.map { $0.utf8.count + 1 } ?? 0)
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: length + 1) { buffer in
            var out = BoundedWriter(buffer)
            out.write(origin)
            out.write(path)
            if let query {
                out.write(byte: UInt8(ascii: "?"))
                out.write(query)
            }
            out.write(byte: 0)
            precondition(!out.overflowed, "a URL's parts outgrew the length they were counted at")
            return UnsafeRawPointer(buffer.baseAddress!).withMemoryRebound(to: CChar.self, capacity: length + 1, body)
        }
    }
}
