import HTTP1

extension UpstreamResponseHead {
    /// Whether a `Content-Encoding` field names a coding other than `identity`: with
    /// `UpstreamRequest.decodesContent` libcurl then decodes the body, and a relay drops the field
    /// and the length, which describe the encoded bytes.
    public var isContentEncoded: Bool {
        storage.withUnsafeBufferPointer { bytes in
            fields.contains { field in
                field.name.count == Self.contentEncodingName.count
                    && asciiEqualsLowercased(
                        UnsafeBufferPointer(rebasing: bytes[field.name]), Self.contentEncodingName.buffer)
                    && !asciiEqualsLowercased(UnsafeBufferPointer(rebasing: bytes[field.value]), Self.identity.buffer)
            }
        }
    }

    /// `content-encoding`, as relays compare names.
    public static let contentEncodingName = StaticBytes("content-encoding")
    private static let identity = StaticBytes("identity")
}
