import JSON

/// Which (subject, experiment, variant) exposures were recorded today (UTC), so the first read
/// per subject per day records one and later reads none. Only today's are kept.
public struct ExposureLog: Sendable, Equatable {
    /// Days since 1970-01-01 UTC of the entries.
    public private(set) var day: Int
    private var seen: Set<Entry>

    private struct Entry: Hashable, Sendable {
        var subject: String
        var experiment: String
        var variant: String
    }

    /// An empty log for `day`.
    public init(day: Int = 0) {
        self.day = day
        seen = []
    }

    /// The UTC day of `now` (Unix seconds).
    public static func day(of now: Double) -> Int { Int((now / 86400).rounded(.down)) }

    /// True, and remembered, when this exposure was not yet recorded on `day`; a new day forgets the old one.
    public mutating func claim(subject: String, experiment: String, variant: String, day: Int) -> Bool {
        if day != self.day {
            self.day = day
            seen.removeAll()
        }
        return seen.insert(Entry(subject: subject, experiment: experiment, variant: variant)).inserted
    }

    /// Forgets a claim whose recording failed, so the next read tries again.
    public mutating func release(subject: String, experiment: String, variant: String, day: Int) {
        guard day == self.day else { return }
        seen.remove(Entry(subject: subject, experiment: experiment, variant: variant))
    }

    /// `{"day": N, "seen": [[subject, experiment, variant], …]}`.
    public var json: JSONValue {
        let entries = seen.sorted { ($0.subject, $0.experiment, $0.variant) < ($1.subject, $1.experiment, $1.variant) }
        var object = JSONObject()
        object["day"] = .number(JSONNumber(day))
        object["seen"] = .array(
            entries.map { .array([.string($0.subject), .string($0.experiment), .string($0.variant)]) })
        return .object(object)
    }

    /// The log in `json`; anything malformed reads as empty.
    public init(json: JSONValue?) {
        day = json?["day"]?.int64Value.map { Int($0) } ?? 0
        seen = []
        for item in json?["seen"]?.arrayValue ?? [] {
            guard let parts = item.arrayValue?.compactMap(\.stringValue), parts.count == 3 else { continue }
            seen.insert(Entry(subject: parts[0], experiment: parts[1], variant: parts[2]))
        }
    }
}
