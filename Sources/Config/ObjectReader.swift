import JSON

/// One JSON object being read at a path; unknown keys were reported when it was opened.
struct ObjectReader {
    let decoder: ConfigDecoder
    let path: String
    let members: JSONObject

    /// Opens `value` as an object allowing only `keys`; nil (reported) when it is not an object.
    init?(_ value: JSONValue, at path: String, keys: [String], decoder: ConfigDecoder) {
        guard case .object(let members) = value else {
            let _: Void? = decoder.mismatch(value, at: path, expected: "an object")
            return nil
        }
        self.decoder = decoder
        self.path = path
        self.members = members
        for key in members.keys where !keys.contains(key) {
            var message = "unknown key"
            if let guess = ObjectReader.suggestion(for: key, among: keys) { message += "; did you mean \"\(guess)\"?" }
            decoder.report(ConfigDecoder.path(path, key), message)
        }
    }

    func path(_ key: String) -> String { ConfigDecoder.path(path, key) }

    /// True when the key is present and not null.
    func has(_ key: String) -> Bool { value(key) != nil }

    /// The member; nil when absent or null (null means "use the default").
    func value(_ key: String) -> JSONValue? {
        guard let v = members[key], !v.isNull else { return nil }
        return v
    }

    /// Reads a member with `read`; a missing required member is reported.
    func read<T>(_ key: String, required: Bool = false, _ read: (JSONValue, String) -> T?) -> T? {
        guard let v = value(key) else {
            if required { decoder.report(path(key), "is required") }
            return nil
        }
        return read(v, path(key))
    }

    func string(_ key: String, required: Bool = false) -> String? {
        read(key, required: required) { decoder.string($0, at: $1) }
    }

    func bool(_ key: String) -> Bool? { read(key) { decoder.bool($0, at: $1) } }

    func integer(_ key: String, in range: ClosedRange<Int>) -> Int? {
        read(key) { decoder.integer($0, at: $1, in: range) }
    }

    func seconds(_ key: String, positive: Bool = false) -> Double? {
        read(key) { decoder.seconds($0, at: $1, positive: positive) }
    }

    func url(_ key: String, required: Bool = false) -> UpstreamURL? {
        read(key, required: required) { decoder.url($0, at: $1) }
    }

    func choice<T: RawRepresentable & CaseIterable>(_ key: String) -> T? where T.RawValue == String {
        read(key) { decoder.choice($0, at: $1) }
    }

    func strings(_ key: String, nonEmpty: Bool = true) -> [String]? {
        read(key) { decoder.strings($0, at: $1, nonEmpty: nonEmpty) }
    }

    func secret(_ key: String, required: Bool = false, token: Bool = false) -> SecretSource? {
        read(key, required: required) { decoder.secret($0, at: $1, token: token) }
    }

    func object(_ key: String, keys: [String], required: Bool = false) -> ObjectReader? {
        read(key, required: required) { ObjectReader($0, at: $1, keys: keys, decoder: decoder) }
    }

    /// A known key within edit distance 2, or equal ignoring case: the likely intended spelling.
    static func suggestion(for key: String, among keys: [String]) -> String? {
        let lower = key.lowercased()
        if let match = keys.first(where: { $0.lowercased() == lower }) { return match }
        let best = keys.map { ($0, editDistance(Array(lower.utf8), Array($0.lowercased().utf8))) }
            .min { $0.1 < $1.1 }
        guard let best, best.1 <= 2, best.1 < key.count else { return nil }
        return best.0
    }

    private static func editDistance(_ a: [UInt8], _ b: [UInt8]) -> Int {
        var previous = Array(0...b.count)
        for (i, x) in a.enumerated() {
            var current = [i + 1]
            for (j, y) in b.enumerated() {
                current.append(Swift.min(previous[j + 1] + 1, current[j] + 1, previous[j] + (x == y ? 0 : 1)))
            }
            previous = current
        }
        return previous[b.count]
    }
}
