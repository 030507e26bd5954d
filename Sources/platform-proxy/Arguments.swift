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
    /// `login --journey [NAME]`: walk an AM journey.
    var journey = false
    /// The tree named after `--journey`, if any.
    var journeyName: String?
    /// `login --answers FILE`: journey answers for scripts.
    var answers: String?
    /// `login --resume URL`: resume a suspended journey.
    var resume: String?
    /// `check-config --schema-only`.
    var schemaOnly = false
    /// `login|logout --provider NAME`: one of several providers.
    var provider: String?
    /// `--profile NAME`: one of the config's `profiles`.
    var profile: String?
    /// `--help` / `-h` anywhere, or `help [COMMAND]`.
    var help = false
    /// `--version`.
    var version = false
    /// The command `help` was asked about (`help serve`, `serve --help`).
    var helpTopic: String?

    /// The commands, in the order the usage lists them.
    static let commands = ["serve", "check-config", "login", "status", "console", "logout", "help"]

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
            case "--journey":
                parsed.journey = true
                // The tree name is optional: the next word is it unless it is an option or a command.
                if let inline {
                    parsed.journeyName = inline
                } else if let next = rest.first, !next.hasPrefix("-"), !commands.contains(next) {
                    parsed.journeyName = rest.popFirst()
                }
            case "--answers": parsed.answers = try value("--answers", inline: inline)
            case "--resume": parsed.resume = try value("--resume", inline: inline)
            case "--schema-only": parsed.schemaOnly = true
            case "--provider": parsed.provider = try value("--provider", inline: inline)
            case "--profile": parsed.profile = try value("--profile", inline: inline)
            default:
                guard !argument.hasPrefix("-") else { throw UsageError("unknown option '\(argument)'") }
                if parsed.command == nil {
                    guard commands.contains(argument) else { throw UsageError("unknown command '\(argument)'") }
                    parsed.command = argument
                } else if parsed.command == "help", parsed.helpTopic == nil {
                    guard commands.contains(argument) else {
                        throw UsageError("no help for '\(argument)': not a command")
                    }
                    parsed.helpTopic = argument
                } else {
                    throw UsageError("unexpected argument '\(argument)'")
                }
            }
        }
        if parsed.command == "help" { parsed.help = true }
        if parsed.help, parsed.helpTopic == nil, parsed.command != "help" { parsed.helpTopic = parsed.command }
        if parsed.device, parsed.command != "login", !parsed.help { throw UsageError("--device belongs to 'login'") }
        let journeyOption =
            parsed.journey ? "--journey" : parsed.resume != nil ? "--resume" : parsed.answers != nil ? "--answers" : nil
        if let journeyOption, parsed.command != "login", !parsed.help {
            throw UsageError("\(journeyOption) belongs to 'login'")
        }
        if parsed.answers != nil, !parsed.journey, parsed.resume == nil {
            throw UsageError("--answers goes with --journey or --resume")
        }
        if parsed.device, parsed.journey || parsed.resume != nil {
            throw UsageError("--device and --journey/--resume are different logins")
        }
        if parsed.provider != nil, parsed.command != "login", parsed.command != "logout", !parsed.help {
            throw UsageError("--provider belongs to 'login' and 'logout'")
        }
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
