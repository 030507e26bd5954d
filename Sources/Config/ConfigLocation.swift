#if canImport(Glibc)
import Glibc
#endif

/// Which config file a command uses, and why: `--config FILE`, then `PLATFORM_PROXY_CONFIG`,
/// then `./Config/platform-proxy.json`, then `/etc/platform-proxy/config.json`.
public struct ConfigLocation: Sendable, Equatable {
    /// The file to read (as given; relative paths are against the working directory).
    public var path: String
    /// Where the choice came from, for messages: "--config", "PLATFORM_PROXY_CONFIG" or "default".
    public var source: String
    /// The profile to apply (`--profile`, else `PLATFORM_PROXY_PROFILE`); nil for the base config.
    public var profile: String?

    /// The environment variable naming the config when `--config` is not given.
    public static let environmentVariable = "PLATFORM_PROXY_CONFIG"
    /// The files looked for, in order, when neither is given.
    public static let defaults = ["Config/platform-proxy.json", "/etc/platform-proxy/config.json"]

    /// A location.
    public init(path: String, source: String, profile: String? = nil) {
        self.path = path
        self.source = source
        self.profile = profile
    }

    /// The config to use; an explicit choice is used even when the file is missing (loading then
    /// says so). Fails with a sentence listing what was tried when nothing names a file.
    public static func resolve(
        explicit: String?, environment: ((String) -> String?)? = nil,
        exists: (String) -> Bool = { access($0, F_OK) == 0 }
    ) -> Result<ConfigLocation, ConfigError> {
        let environment = environment ?? SecretSource.processEnvironment
        if let explicit { return .success(ConfigLocation(path: explicit, source: "--config")) }
        if let named = environment(environmentVariable), !named.isEmpty {
            return .success(ConfigLocation(path: named, source: environmentVariable))
        }
        for candidate in defaults where exists(candidate) {
            return .success(ConfigLocation(path: candidate, source: "default"))
        }
        let tried = defaults.map { $0.hasPrefix("/") ? $0 : "./" + $0 }.joined(separator: " and ")
        return .failure(
            ConfigError(
                path: "",
                message:
                    "no config file: give --config FILE or set \(environmentVariable) (looked for \(tried))"))
    }

    /// The loaded configuration at this location, with its profile.
    public func load(schemaOnly: Bool = false) -> Result<ProxyConfiguration, ConfigErrors> {
        ConfigLoader.load(path: path, schemaOnly: schemaOnly, profile: profile)
    }

    /// "Config/platform-proxy.json (default)", for the first line a command prints.
    public var description: String {
        "\(path) (\(source == "default" ? "found in the default places" : "from \(source)"))"
    }
}
