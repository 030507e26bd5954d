import JSON

/// QA overrides: experiment name → forced variant, for every subject on this machine.
package struct ExperimentOverrides: Sendable, Equatable {
    private var variants: [String: String]

    /// No overrides.
    package init(_ variants: [String: String] = [:]) {
        self.variants = variants
    }

    /// The forced variant of `experiment`, if any.
    package func variant(for experiment: String) -> String? { variants[experiment] }

    /// Forces `variant` for `experiment`.
    package mutating func set(_ variant: String, for experiment: String) { variants[experiment] = variant }

    /// Clears `experiment`'s override; false if it had none.
    @discardableResult
    package mutating func clear(_ experiment: String) -> Bool { variants.removeValue(forKey: experiment) != nil }

    /// `{"name": "variant", …}`, sorted by name.
    package var json: JSONValue {
        var object = JSONObject()
        for name in variants.keys.sorted() { object[name] = .string(variants[name]!) }
        return .object(object)
    }

    /// Overrides from `json`; members that are not strings are left out.
    package init(json: JSONValue?) {
        var variants: [String: String] = [:]
        for (name, value) in json?.objectValue ?? JSONObject() {
            if let variant = value.stringValue { variants[name] = variant }
        }
        self.variants = variants
    }
}
