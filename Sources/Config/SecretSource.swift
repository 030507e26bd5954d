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

    /// The current value of a token that is sent in a header (`Authorization: Bearer <token>`):
    /// one with a space, a control byte or a non-ASCII byte is an error, never a header.
    public func resolveToken() throws(ConfigError) -> String {
        try resolveToken(at: "", environment: SecretSource.processEnvironment)
    }

    func resolveToken(at path: String, environment: (String) -> String?) throws(ConfigError) -> String {
        let value = try resolve(at: path, environment: environment)
        if let offset = value.utf8.firstIndex(where: { !Self.isHeaderTokenByte($0) }) {
            let position = value.utf8.distance(from: value.utf8.startIndex, to: offset)
            // The offset and the byte's kind only: the secret itself is never in a message.
            throw ConfigError(
                path: path,
                message: "the token (\(description)) has a space, control or non-ASCII byte at "
                    + "offset \(position); a token is sent in a header and must be visible ASCII")
        }
        return value
    }

    /// Whether `text` is only visible ASCII: RFC 6750's b64token and every token type are.
    public static func isHeaderToken(_ text: String) -> Bool { text.utf8.allSatisfy(isHeaderTokenByte) }

    private static func isHeaderTokenByte(_ byte: UInt8) -> Bool { byte > 0x20 && byte < 0x7F }

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
