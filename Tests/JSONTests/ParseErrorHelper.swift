@testable import JSON

/// The error parsing `bytes` throws, or nil when it parses.
func parseError(_ bytes: [UInt8], maxDepth: Int = JSONValue.defaultMaxDepth) -> JSONParseError? {
    do {
        _ = try JSONValue.parse(bytes, maxDepth: maxDepth)
        return nil
    } catch {
        return error
    }
}

/// The error parsing `text` throws, or nil when it parses.
func parseError(_ text: String, maxDepth: Int = JSONValue.defaultMaxDepth) -> JSONParseError? {
    parseError(Array(text.utf8), maxDepth: maxDepth)
}
