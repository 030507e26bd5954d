import JSON

/// QA overrides: experiment name → forced variant, for every subject on this machine.
public struct ExperimentOverrides: Sendable, Equatable {
    private var variants: [String: String]

    /// No overrides.
    public init(_ variants: [String: String] = [:]) {
        self.variants = variants
    }

    /// The forced variant of `experiment`, if any.
    public func variant(for experiment: String) -> String? { variants[experiment] }

    /// Forces `variant` for `experiment`.
    public mutating func set(_ variant: String, for experiment: String) { variants[experiment] = variant }

    /// Clears `experiment`'s override; false if it had none.
    @discardableResult
    public mutating func clear(_ experiment: String) -> Bool { variants.removeValue(forKey: experiment) != nil }

    /// `{"name": "variant", …}`, sorted by name.
    public var json: JSONValue {
        var object = JSONObject()
        for name in variants.keys.sorted() { object[name] = .string(variants[name]!) }
        return .object(object)
    }

    /// Overrides from `json`; members that are not strings are left out.
    public init(json: JSONValue?) {
        var variants: [String: String] = [:]
        for (name, value) in json?.objectValue ?? JSONObject() {
            if let variant = value.stringValue { variants[name] = variant }
        }
        self.variants = variants
    }
}
