#if canImport(Glibc)
import Glibc
#endif

/// Where a secret comes from: written in the config, an environment variable, or a file.
public enum SecretSource: Sendable, Equatable {
    /// The value itself, written in the config.
    case literal(String)
    /// The named environment variable, read when resolved.
    case env(String)
    /// An absolute file path, re-read on every resolve so a rotated token file is picked up.
    case file(String)

    /// Secret files larger than this are refused: tokens are kilobytes, not megabytes.
    public static let maxFileBytes = 1 << 20

    /// The secret's current value; a file's contents lose trailing whitespace and newlines.
    public func resolve() throws(ConfigError) -> String {
        try resolve(at: "", environment: SecretSource.processEnvironment)
    }

    /// Resolves, naming `path` in any error and reading variables through `environment`.
    func resolve(at path: String, environment: (String) -> String?) throws(ConfigError) -> String {
        switch self {
        case .literal(let value):
            guard !value.isEmpty else { throw ConfigError(path: path, message: "the secret is empty") }
            return value
        case .env(let name):
            guard let value = environment(name) else {
                throw ConfigError(path: path, message: "environment variable \(name) is not set")
            }
            guard !value.isEmpty else {
                throw ConfigError(path: path, message: "environment variable \(name) is empty")
            }
            return value
        case .file(let file):
            let bytes: [UInt8]
            switch FileSystem.readFile(file, limit: SecretSource.maxFileBytes) {
            case .success(let read): bytes = read
            case .failure(let error): throw ConfigError(path: path, message: error.message)
            }
            let trimmed = bytes.reversed().drop { $0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D }
            guard !trimmed.isEmpty else { throw ConfigError(path: path, message: "the file \(file) is empty") }
            return String(decoding: trimmed.reversed(), as: UTF8.self)
        }
    }

    /// The real process environment.
    static let processEnvironment: @Sendable (String) -> String? = { name in
        getenv(name).map { String(cString: $0) }
    }
}

extension SecretSource: CustomStringConvertible {
    /// Names the source without ever showing a literal secret.
    public var description: String {
        switch self {
        case .literal: return "<literal>"
        case .env(let name): return "env \(name)"
        case .file(let path): return "file \(path)"
        }
    }
}
