/// What a field is to a relay, in either direction: its framing, or hop-by-hop (RFC 9110 §7.6.1),
/// or end to end. The one list of those names: the request side drops them before curl, the
/// response side before the client.
public enum FieldRole: UInt8, Sendable {
    /// An end-to-end field.
    case endToEnd
    /// `Content-Length`: a relay frames the body itself.
    case contentLength
    /// `Transfer-Encoding`: hop-by-hop, and it voids `Content-Length` (RFC 9112 §6.3).
    case transferEncoding
    /// `Connection`: hop-by-hop, and it may name more hop-by-hop fields (RFC 9110 §7.6.1).
    case connection
    /// `Keep-Alive`, `Proxy-Connection`, `TE`, `Trailer` or `Upgrade`: hop-by-hop.
    case hopByHop

    /// The role of a field called `name` (any case): told apart by length and first letter, so
    /// most fields are `endToEnd` without a comparison of bytes.
    public init(name: UnsafeBufferPointer<UInt8>) {
        guard let first = name.first else { self = .endToEnd; return }
        func isName(_ lowercased: StaticBytes) -> Bool { asciiEqualsLowercased(name, lowercased.buffer) }
        switch (name.count, first | 0x20) {
        case (2, UInt8(ascii: "t")): self = isName(Names.te) ? .hopByHop : .endToEnd
        case (7, UInt8(ascii: "t")): self = isName(Names.trailer) ? .hopByHop : .endToEnd
        case (7, UInt8(ascii: "u")): self = isName(Names.upgrade) ? .hopByHop : .endToEnd
        case (10, UInt8(ascii: "c")): self = isName(Names.connection) ? .connection : .endToEnd
        case (10, UInt8(ascii: "k")): self = isName(Names.keepAlive) ? .hopByHop : .endToEnd
        case (14, UInt8(ascii: "c")): self = isName(Names.contentLength) ? .contentLength : .endToEnd
        case (16, UInt8(ascii: "p")): self = isName(Names.proxyConnection) ? .hopByHop : .endToEnd
        case (17, UInt8(ascii: "t")): self = isName(Names.transferEncoding) ? .transferEncoding : .endToEnd
        default: self = .endToEnd
        }
    }

    private enum Names {
        static let te = StaticBytes("te")
        static let trailer = StaticBytes("trailer")
        static let upgrade = StaticBytes("upgrade")
        static let connection = StaticBytes("connection")
        static let keepAlive = StaticBytes("keep-alive")
        static let contentLength = StaticBytes("content-length")
        static let proxyConnection = StaticBytes("proxy-connection")
        static let transferEncoding = StaticBytes("transfer-encoding")
    }
}
