import JSON

/// JSON Merge Patch (RFC 7396): how a profile changes the base config.
public enum MergePatch {
    /// `patch` applied to `target`: an object patch merges member by member (`null` removes a
    /// member), anything else replaces the target whole (arrays included).
    public static func apply(_ patch: JSONValue, to target: JSONValue) -> JSONValue {
        guard case .object(let changes) = patch else { return patch }
        var result = target.objectValue ?? JSONObject()
        for (key, value) in changes {
            if value.isNull {
                result[key] = nil
            } else {
                result[key] = apply(value, to: result[key] ?? .null)
            }
        }
        return .object(result)
    }
}
