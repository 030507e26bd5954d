/// A JSON object: members in insertion order, each key at most once.
///
/// Equality ignores order (RFC 8259 objects are unordered); serialization keeps it.
public struct JSONObject: Sendable, Equatable, Sequence {
    /// One member.
    public typealias Element = (key: String, value: JSONValue)

    private var entries: [Element] = []
    // Built once an object grows past a handful of keys, so hostile bodies with
    // many keys stay linear while small objects skip the hashing.
    private var index: [String: Int]?
    private static let indexThreshold = 12

    /// An empty object.
    public init() {}

    /// Members in the given order; a repeated key is a programming error.
    public init(uniqueKeysWithValues pairs: some Sequence<(String, JSONValue)>) {
        for (key, value) in pairs {
            precondition(insertNew(key, value), "duplicate JSON object key \"\(key)\"")
        }
    }

    /// Number of members.
    public var count: Int { entries.count }

    /// True when there are no members.
    public var isEmpty: Bool { entries.isEmpty }

    /// The keys in order.
    public var keys: [String] { entries.map(\.key) }

    /// True when `key` is a member.
    public func contains(_ key: String) -> Bool { position(of: key) != nil }

    /// The value for `key`; setting nil removes the member, setting a new key appends it.
    public subscript(key: String) -> JSONValue? {
        get { position(of: key).map { entries[$0].value } }
        set {
            if let i = position(of: key) {
                if let newValue {
                    entries[i].value = newValue
                } else {
                    entries.remove(at: i)
                    rebuildIndex()
                }
            } else if let newValue {
                appendUnchecked(key, newValue)
            }
        }
    }

    /// Appends a member unless `key` is present; returns false (and changes nothing) if it is.
    @discardableResult
    public mutating func insertNew(_ key: String, _ value: JSONValue) -> Bool {
        if position(of: key) != nil { return false }
        appendUnchecked(key, value)
        return true
    }

    /// Iterates the members in order.
    public func makeIterator() -> IndexingIterator<[Element]> { entries.makeIterator() }

    /// Same keys with equal values, in any order.
    public static func == (a: JSONObject, b: JSONObject) -> Bool {
        guard a.count == b.count else { return false }
        for (key, value) in a.entries {
            guard let other = b[key], other == value else { return false }
        }
        return true
    }

    func position(of key: String) -> Int? {
        if let index { return index[key] }
        return entries.firstIndex { $0.key == key }
    }

    mutating func appendUnchecked(_ key: String, _ value: JSONValue) {
        entries.append((key, value))
        if index != nil {
            index![key] = entries.count - 1
        } else if entries.count > JSONObject.indexThreshold {
            rebuildIndex()
        }
    }

    private mutating func rebuildIndex() {
        guard entries.count > JSONObject.indexThreshold else { index = nil; return }
        var built: [String: Int] = [:]
        built.reserveCapacity(entries.count)
        for (i, entry) in entries.enumerated() { built[entry.key] = i }
        index = built
    }
}
