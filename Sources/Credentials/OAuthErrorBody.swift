import JSON

/// The error response of an OAuth endpoint (RFC 6749 §5.2): `{"error": "...", "error_description": "..."}`.
public enum OAuthErrorBody {
    /// The `error` code and optional `error_description`; nil unless the body is a JSON
    /// object with a string `error`, so a proxy's HTML error page is not mistaken for one.
    public static func parse(_ body: [UInt8]) -> (error: String, description: String?)? {
        guard let object = (try? JSONValue.parse(body))?.objectValue,
            let error = object["error"]?.stringValue, !error.isEmpty
        else { return nil }
        return (error, object["error_description"]?.stringValue)
    }
}
