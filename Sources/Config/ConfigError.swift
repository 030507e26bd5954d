/// One problem with a config file, at a JSON path such as `routes[2].upstream`.
public struct ConfigError: Error, Sendable, Equatable, CustomStringConvertible {
    /// JSON path of the offending key (`limits.maxBodyBytes`, `routes[0]`); empty for the whole file.
    public var path: String
    /// A plain-English sentence saying what is wrong.
    public var message: String

    /// An error at a path.
    public init(path: String, message: String) {
        self.path = path
        self.message = message
    }

    /// "routes[2].upstream: expected an absolute http or https URL", or just the message at the root.
    public var description: String { path.isEmpty ? message : "\(path): \(message)" }
}

/// Every problem found in a config file; loading never stops at the first.
public struct ConfigErrors: Error, Sendable, Equatable, CustomStringConvertible {
    /// The problems, in the order they were found.
    public var errors: [ConfigError]

    /// A list of problems.
    public init(_ errors: [ConfigError]) {
        self.errors = errors
    }

    /// One problem per line.
    public var description: String { errors.map(\.description).joined(separator: "\n") }
}
