/// Parsing entry points.
extension JSONValue {
    /// Arrays and objects nested deeper than this are rejected, so hostile input cannot exhaust memory.
    public static let defaultMaxDepth = 512

    /// Parses one complete JSON text (RFC 8259, strict: no comments, no trailing commas, no BOM).
    public static func parse(
        _ bytes: UnsafeRawBufferPointer, maxDepth: Int = defaultMaxDepth
    ) throws(JSONParseError) -> JSONValue {
        var parser = JSONParser(bytes: bytes, maxDepth: maxDepth)
        return try parser.parseDocument()
    }

    /// Parses one complete JSON text from any byte collection (`[UInt8]`, `ArraySlice`, `String.UTF8View`).
    public static func parse(
        _ bytes: some Collection<UInt8>, maxDepth: Int = defaultMaxDepth
    ) throws(JSONParseError) -> JSONValue {
        let contiguous = bytes.withContiguousStorageIfAvailable { buffer in
            Result { () throws(JSONParseError) in
                try parse(UnsafeRawBufferPointer(buffer), maxDepth: maxDepth)
            }
        }
        if let contiguous { return try contiguous.get() }
        return try Array(bytes).withUnsafeBytes { buffer in
            Result { () throws(JSONParseError) in try parse(buffer, maxDepth: maxDepth) }
        }.get()
    }

    /// Parses one complete JSON text from a string.
    public static func parse(_ text: String, maxDepth: Int = defaultMaxDepth) throws(JSONParseError) -> JSONValue {
        var text = text
        return try text.withUTF8 { buffer in
            Result { () throws(JSONParseError) in try parse(UnsafeRawBufferPointer(buffer), maxDepth: maxDepth) }
        }.get()
    }
}
