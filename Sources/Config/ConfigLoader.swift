import JSON

/// Reads and validates config files.
public enum ConfigLoader {
    /// Config files larger than this are refused.
    public static let maxFileBytes = 4 << 20

    /// Reads, parses and validates the file at `path`; relative paths in it resolve against its directory.
    /// With `schemaOnly`, secrets given as files or environment variables are not read (for CI,
    /// where they do not exist).
    /// `profile` selects one of the config's `profiles` (a JSON Merge Patch over the base).
    public static func load(path: String, schemaOnly: Bool = false, profile: String? = nil) -> Result<
        ProxyConfiguration, ConfigErrors
    > {
        load(path: path, environment: SecretSource.processEnvironment, schemaOnly: schemaOnly, profile: profile)
    }

    /// `load(path:)` reading environment variables through `environment` (for tests).
    public static func load(
        path: String, environment: (String) -> String?, schemaOnly: Bool = false, profile: String? = nil
    ) -> Result<ProxyConfiguration, ConfigErrors> {
        let absolute = FileSystem.resolve(path, against: FileSystem.currentDirectory())
        switch FileSystem.readFile(absolute, limit: maxFileBytes) {
        case .success(let bytes):
            return parse(
                bytes, configDirectory: FileSystem.directory(of: absolute), environment: environment,
                schemaOnly: schemaOnly, profile: profile)
        case .failure(let error):
            return .failure(ConfigErrors([error]))
        }
    }

    /// The names under `profiles` in the file at `path`, in file order; empty when it has none
    /// or cannot be read (loading it reports why).
    public static func profileNames(path: String) -> [String] {
        let absolute = FileSystem.resolve(path, against: FileSystem.currentDirectory())
        guard case .success(let bytes) = FileSystem.readFile(absolute, limit: maxFileBytes),
            let root = try? JSONValue.parse(bytes)
        else { return [] }
        return ConfigProfiles.names(in: root)
    }

    /// Parses and validates config JSON; relative paths resolve against `configDirectory`.
    public static func parse(_ bytes: [UInt8], configDirectory: String) -> Result<ProxyConfiguration, ConfigErrors> {
        parse(bytes, configDirectory: configDirectory, environment: SecretSource.processEnvironment)
    }

    /// `parse(_:configDirectory:)` reading environment variables through `environment` (for tests).
    public static func parse(
        _ bytes: [UInt8], configDirectory: String, environment: (String) -> String?, schemaOnly: Bool = false,
        profile: String? = nil
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
            let document = ConfigProfiles.select(profile, in: root, decoder: decoder)
            var config = decoder.proxyConfiguration(document)
            config?.profile = profile
            config?.profileNames = ConfigProfiles.names(in: root)
            if profile == "release", let config { ConfigProfiles.checkRelease(config, decoder: decoder) }
            guard decoder.errors.isEmpty, let config else { return .failure(ConfigErrors(decoder.errors)) }
            return .success(config)
        }
    }
}
