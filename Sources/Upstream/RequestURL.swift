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
