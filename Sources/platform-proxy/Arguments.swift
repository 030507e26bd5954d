/// The parsed command line: a command, its options, or a usage error to report in one line.
struct Arguments {
    /// `serve`, `check-config`, `login`, `status`, `logout`, `help`; nil when none was given.
    var command: String?
    /// `--config FILE` / `--config=FILE`.
    var config: String?
    /// `--log-level LEVEL`.
    var logLevel: String?
    /// `login --device`.
    var device = false
    /// `check-config --schema-only`.
    var schemaOnly = false
    /// `--help` / `-h` anywhere, or `help [COMMAND]`.
    var help = false
    /// `--version`.
    var version = false
    /// The command `help` was asked about (`help serve`, `serve --help`).
    var helpTopic: String?

    /// The commands, in the order the usage lists them.
    static let commands = ["serve", "check-config", "login", "status", "logout", "help"]

    /// Parses `arguments` (without the program name); throws a one-line usage error.
    static func parse(_ arguments: [String]) throws(UsageError) -> Arguments {
        var parsed = Arguments()
        var rest = arguments[...]
        func value(_ option: String, inline: String?) throws(UsageError) -> String {
            if let inline {
                guard !inline.isEmpty else { throw UsageError("\(option)= needs a value") }
                return inline
            }
            guard let next = rest.popFirst(), !next.hasPrefix("--") else { throw UsageError("\(option) needs a value") }
            return next
        }
        while let argument = rest.popFirst() {
            let (name, inline) = split(argument)
            switch name {
            case "--help", "-h": parsed.help = true
            case "--version": parsed.version = true
            case "--config": parsed.config = try value("--config", inline: inline)
            case "--log-level": parsed.logLevel = try value("--log-level", inline: inline)
            case "--device": parsed.device = true
            case "--schema-only": parsed.schemaOnly = true
            default:
                guard !argument.hasPrefix("-") else { throw UsageError("unknown option '\(argument)'") }
                if parsed.command == nil {
                    guard commands.contains(argument) else { throw UsageError("unknown command '\(argument)'") }
                    parsed.command = argument
                } else if parsed.command == "help", parsed.helpTopic == nil {
                    guard commands.contains(argument) else { throw UsageError("no help for '\(argument)': not a command") }
                    parsed.helpTopic = argument
                } else {
                    throw UsageError("unexpected argument '\(argument)'")
                }
            }
        }
        if parsed.command == "help" { parsed.help = true }
        if parsed.help, parsed.helpTopic == nil, parsed.command != "help" { parsed.helpTopic = parsed.command }
        if parsed.device, parsed.command != "login", !parsed.help { throw UsageError("--device belongs to 'login'") }
        if parsed.schemaOnly, parsed.command != "check-config", !parsed.help {
            throw UsageError("--schema-only belongs to 'check-config'")
        }
        return parsed
    }

    /// `--name=value` → ("--name", "value"); anything else → (argument, nil).
    private static func split(_ argument: String) -> (String, String?) {
        guard argument.hasPrefix("--"), let equals = argument.firstIndex(of: "=") else { return (argument, nil) }
        return (String(argument[..<equals]), String(argument[argument.index(after: equals)...]))
    }
}

/// A command-line mistake, reported as one line plus a hint.
struct UsageError: Error {
    /// What was wrong, e.g. "unknown command 'srve'".
    let message: String

    init(_ message: String) { self.message = message }
}
