import JSON

extension ConfigDecoder {
    static let experimentKeys = ["variants", "salt", "enabled", "start", "end"]

    /// The `experiments` object, in config order; invalid experiments are reported and left out.
    func experiments(_ value: JSONValue, at path: String) -> [ExperimentConfiguration]? {
        guard case .object(let members) = value else { return mismatch(value, at: path, expected: "an object") }
        var experiments: [ExperimentConfiguration] = []
        for (name, item) in members {
            let itemPath = ConfigDecoder.path(path, name)
            let validName = experimentName(name, at: itemPath, what: "an experiment name")
            guard let object = ObjectReader(item, at: itemPath, keys: ConfigDecoder.experimentKeys, decoder: self)
            else { continue }
            let variants = object.read("variants", required: true, variants)
            let salt = object.read("salt") { string($0, at: $1, allowEmpty: true) } ?? ""
            let enabled = object.bool("enabled") ?? true
            let start = object.read("start", timestamp)
            let end = object.read("end", timestamp)
            if let start, let end, end <= start { report(object.path("end"), "must be later than start") }
            guard validName, let variants else { continue }
            experiments.append(
                ExperimentConfiguration(
                    name: name, variants: variants, salt: salt, enabled: enabled,
                    start: start, end: end))
        }
        return experiments
    }

    /// `{"control": 50, "new": 50}`: at least one variant, weights 0 or more, not all 0.
    private func variants(_ value: JSONValue, at path: String) -> [ExperimentConfiguration.Variant]? {
        guard case .object(let members) = value else {
            return mismatch(value, at: path, expected: "an object of variant weights")
        }
        guard !members.isEmpty else { return failure(path, "must list at least one variant") }
        var variants: [ExperimentConfiguration.Variant] = []
        var valid = true
        for (name, weight) in members {
            let weightPath = ConfigDecoder.path(path, name)
            valid = experimentName(name, at: weightPath, what: "a variant name") && valid
            guard case .number(let n) = weight else {
                valid = false
                report(weightPath, "expected a weight (a number, 0 or more), not \(weight.kindDescription)")
                continue
            }
            guard n.double >= 0, n.double.isFinite, n.double <= 1e12 else {
                valid = false
                report(weightPath, "expected a weight from 0 to 1000000000000, not \(n.text)")
                continue
            }
            variants.append(.init(name: name, weight: n.double))
        }
        guard valid else { return nil }
        guard variants.contains(where: { $0.weight > 0 }) else {
            return failure(path, "at least one weight must be above 0")
        }
        return variants
    }

    /// Names become analytics key segments and `X-Experiments` items, so they stay plain; 48 bytes
    /// each keep `<root>.experiment.<name>.<variant>` within the 256-byte key limit.
    private func experimentName(_ name: String, at path: String, what: String) -> Bool {
        let plain =
            !name.isEmpty && name.utf8.count <= 48
            && name.utf8.allSatisfy { b in
                (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || b == 0x5F
                    || b == 0x2D
            }
        if !plain { report(path, "\(what) must be 1 to 48 letters, digits, '_' or '-'") }
        return plain
    }

    private func timestamp(_ value: JSONValue, at path: String) -> Double? {
        guard let text = string(value, at: path) else { return nil }
        guard let seconds = RFC3339.parse(text) else {
            return failure(
                path, "expected an ISO 8601 date-time with a zone, such as \"2026-11-01T00:00:00Z\", not \"\(text)\"")
        }
        return seconds
    }
}
