import JSON

/// Reads a parsed config document, collecting every problem with its JSON path.
///
/// Each reader returns nil for an invalid value after reporting it, so the
/// caller falls back to a default and keeps going: one run finds all errors.
final class ConfigDecoder {
    private(set) var errors: [ConfigError] = []
    /// Absolute directory relative paths resolve against.
    let directory: String
    let environment: (String) -> String?
    /// Whether secrets (environment variables, files) are read to check them; off for `check-config --schema-only`.
    let resolvesSecrets: Bool

    init(directory: String, environment: @escaping (String) -> String?, resolvesSecrets: Bool = true) {
        self.directory = directory
        self.environment = environment
        self.resolvesSecrets = resolvesSecrets
    }

    func report(_ path: String, _ message: String) {
        errors.append(ConfigError(path: path, message: message))
    }

    func string(_ value: JSONValue, at path: String, allowEmpty: Bool = false) -> String? {
        guard case .string(let s) = value else { return mismatch(value, at: path, expected: "a string") }
        guard allowEmpty || !s.isEmpty else { return failure(path, "must not be empty") }
        return s
    }

    func bool(_ value: JSONValue, at path: String) -> Bool? {
        guard case .bool(let b) = value else { return mismatch(value, at: path, expected: "true or false") }
        return b
    }

    /// An integral number in `range`; the literal decides, so 2^53 + 1 is not mistaken for 2^53.
    func integer(_ value: JSONValue, at path: String, in range: ClosedRange<Int>) -> Int? {
        let expected: String
        switch (range.lowerBound, range.upperBound) {
        case (0, .max): expected = "a non-negative integer"
        case (1, .max): expected = "a positive integer"
        case (let low, let high): expected = "an integer from \(low) to \(high)"
        }
        guard case .number(let n) = value else { return mismatch(value, at: path, expected: expected) }
        guard let exact = n.int64, let int = Int(exactly: exact), range.contains(int) else {
            return failure(path, "expected \(expected), not \(n.text)")
        }
        return int
    }

    /// The longest duration accepted; keeps later conversions to nanoseconds far from overflow.
    static let maxSeconds = 1_000_000_000.0

    /// A number of seconds (fractions allowed), zero or more, or more than zero when `positive`.
    func seconds(_ value: JSONValue, at path: String, positive: Bool = false) -> Double? {
        let expected = positive ? "a number of seconds greater than 0" : "a number of seconds (0 or more)"
        guard case .number(let n) = value else { return mismatch(value, at: path, expected: expected) }
        let d = n.double
        guard positive ? d > 0 : d >= 0 else { return failure(path, "expected \(expected), not \(n.text)") }
        guard d <= ConfigDecoder.maxSeconds else {
            return failure(path, "must be at most \(Int(ConfigDecoder.maxSeconds)) seconds")
        }
        return d
    }

    func choice<T: RawRepresentable & CaseIterable>(_ value: JSONValue, at path: String) -> T?
    where T.RawValue == String {
        let names = T.allCases.map { "\"\($0.rawValue)\"" }
        let list = names.dropLast().joined(separator: ", ") + " or " + names.last!
        guard case .string(let s) = value else { return mismatch(value, at: path, expected: list) }
        guard let choice = T(rawValue: s) else { return failure(path, "expected \(list), not \"\(s)\"") }
        return choice
    }

    func url(_ value: JSONValue, at path: String) -> UpstreamURL? {
        guard let text = string(value, at: path) else { return nil }
        switch UpstreamURL.validate(text) {
        case .success(let url): return url
        case .failure(let refusal):
            return failure(path, "expected an absolute http or https URL, but \(refusal.reason)")
        }
    }

    /// A path resolved against the config directory.
    func filePath(_ value: JSONValue, at path: String) -> String? {
        string(value, at: path).map { FileSystem.resolve($0, against: directory) }
    }

    /// Array elements with their paths; nil (reported) when the value is not an array.
    func array(_ value: JSONValue, at path: String) -> [(path: String, value: JSONValue)]? {
        guard case .array(let items) = value else { return mismatch(value, at: path, expected: "an array") }
        return items.enumerated().map { ("\(path)[\($0.offset)]", $0.element) }
    }

    /// An array of non-empty strings; invalid elements are reported and left out.
    func strings(_ value: JSONValue, at path: String, nonEmpty: Bool = true) -> [String]? {
        guard let items = array(value, at: path) else { return nil }
        if nonEmpty, items.isEmpty { return failure(path, "must list at least one value") }
        return items.compactMap { string($0.value, at: $0.path) }
    }

    /// Reports that the value is of the wrong kind; always nil.
    func mismatch<T>(_ value: JSONValue, at path: String, expected: String) -> T? {
        failure(path, "expected \(expected), not \(value.kindDescription)")
    }

    /// Reports a problem; always nil, so readers can `return failure(...)`.
    func failure<T>(_ path: String, _ message: String) -> T? {
        report(path, message)
        return nil
    }

    /// `parent.key`, or `parent["odd key"]` when the key is not a plain identifier.
    static func path(_ parent: String, _ key: String) -> String {
        let plain =
            !key.isEmpty
            && key.utf8.allSatisfy { b in
                (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || b == 0x5F
                    || b == 0x2D
            }
        if !plain { return parent + "[" + jsonQuoted(key) + "]" }
        return parent.isEmpty ? key : parent + "." + key
    }
}
