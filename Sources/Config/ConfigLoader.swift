import JSON

/// Reads and validates config files.
public enum ConfigLoader {
    /// Config files larger than this are refused.
    public static let maxFileBytes = 4 << 20

    /// Reads, parses and validates the file at `path`; relative paths in it resolve against its directory.
    /// With `schemaOnly`, secrets given as files or environment variables are not read (for CI,
    /// where they do not exist).
    public static func load(path: String, schemaOnly: Bool = false) -> Result<ProxyConfiguration, ConfigErrors> {
        load(path: path, environment: SecretSource.processEnvironment, schemaOnly: schemaOnly)
    }

    /// `load(path:)` reading environment variables through `environment` (for tests).
    public static func load(
        path: String, environment: (String) -> String?, schemaOnly: Bool = false
    ) -> Result<ProxyConfiguration, ConfigErrors> {
        let absolute = FileSystem.resolve(path, against: FileSystem.currentDirectory())
        switch FileSystem.readFile(absolute, limit: maxFileBytes) {
        case .success(let bytes):
            return parse(bytes, configDirectory: FileSystem.directory(of: absolute), environment: environment,
                         schemaOnly: schemaOnly)
        case .failure(let error):
            return .failure(ConfigErrors([error]))
        }
    }

    /// Parses and validates config JSON; relative paths resolve against `configDirectory`.
    public static func parse(_ bytes: [UInt8], configDirectory: String) -> Result<ProxyConfiguration, ConfigErrors> {
        parse(bytes, configDirectory: configDirectory, environment: SecretSource.processEnvironment)
    }

    /// `parse(_:configDirectory:)` reading environment variables through `environment` (for tests).
    public static func parse(
        _ bytes: [UInt8], configDirectory: String, environment: (String) -> String?, schemaOnly: Bool = false
    ) -> Result<ProxyConfiguration, ConfigErrors> {
        let root: JSONValue
        do {
            root = try JSONValue.parse(bytes)
        } catch {
            let message = "invalid JSON at line \(error.line), column \(error.column): \(error.message)"
            return .failure(ConfigErrors([ConfigError(path: "", message: message)]))
        }
        let directory = FileSystem.resolve(configDirectory, against: FileSystem.currentDirectory())
        return withoutActuallyEscaping(environment) { environment in
            let decoder = ConfigDecoder(directory: directory, environment: environment, resolvesSecrets: !schemaOnly)
            let config = decoder.proxyConfiguration(root)
            guard decoder.errors.isEmpty, let config else { return .failure(ConfigErrors(decoder.errors)) }
            return .success(config)
        }
    }
}
