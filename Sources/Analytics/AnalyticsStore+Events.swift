/// A value to store: who it is attributed to, its key path, its value and when it happened.
public struct NewEvent: Sendable, Equatable {
    /// The user it belongs to (the id_token's `pennkey`, or `sub`).
    public var subject: String
    /// The full dot-path key, root included.
    public var key: String
    /// The recorded value, e.g. `"1"` or a duration in milliseconds.
    public var value: String
    /// When it happened, Unix seconds.
    public var timestamp: Int64

    /// An event for `subject` recording `value` under `key` at `timestamp` (Unix seconds).
    public init(subject: String, key: String, value: String, timestamp: Int64) {
        self.subject = subject
        self.key = key
        self.value = value
        self.timestamp = timestamp
    }
}

/// An event as the store holds it, with the id that `delete(ids:)` takes.
public struct StoredEvent: Sendable, Equatable {
    /// Row id: increases with insertion order and is never reused.
    public var id: Int64
    /// The user it belongs to.
    public var subject: String
    /// The full dot-path key.
    public var key: String
    /// The recorded value.
    public var value: String
    /// When it happened, Unix seconds.
    public var timestamp: Int64

    /// A stored event; the store builds these, tests compare against them.
    public init(id: Int64, subject: String, key: String, value: String, timestamp: Int64) {
        self.id = id
        self.subject = subject
        self.key = key
        self.value = value
        self.timestamp = timestamp
    }
}
