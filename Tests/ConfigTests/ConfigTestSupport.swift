import Foundation

@testable import Config

/// The directory every in-memory test config pretends to live in.
let testDirectory = "/etc/platform-proxy"

/// Parses `json` as a config living in `testDirectory`, reading variables from `env` only.
func parseConfig(
    _ json: String, env: [String: String] = [:], directory: String = testDirectory
) -> Result<ProxyConfiguration, ConfigErrors> {
    ConfigLoader.parse(Array(json.utf8), configDirectory: directory, environment: { env[$0] })
}

/// The valid config, or nil (the test then fails on its expectations).
func validConfig(_ json: String, env: [String: String] = [:], directory: String = testDirectory) -> ProxyConfiguration?
{
    try? parseConfig(json, env: env, directory: directory).get()
}

/// The error lines for `json`; empty when it is valid.
func configErrors(_ json: String, env: [String: String] = [:], directory: String = testDirectory) -> [String] {
    switch parseConfig(json, env: env, directory: directory) {
    case .success: return []
    case .failure(let errors): return errors.errors.map(\.description)
    }
}

/// A fresh temporary directory, removed by the caller with `removeTemporaryDirectory`.
func makeTemporaryDirectory() throws -> String {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("config-tests-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url.path
}

func removeTemporaryDirectory(_ path: String) {
    try? FileManager.default.removeItem(atPath: path)
}

/// A static-grant provider block, for configs whose routes need credentials.
let staticProvider = #""provider": {"grant": "static", "accessToken": "t", "idToken": "i"}"#

/// The repository root, found from this file's path.
func repositoryRoot(file: String = #filePath) -> URL {
    URL(fileURLWithPath: file).resolvingSymlinksInPath().deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
}

extension AnalyticsConfiguration {
    /// The same block as the decoder leaves it when `provider` is chosen (the only provider's name).
    func withProvider(_ name: String) -> Self {
        var copy = self
        copy.provider = name
        return copy
    }
}

extension RouteConfiguration {
    /// The same route as the decoder leaves it when `provider` is chosen (the only provider's name).
    func withProvider(_ name: String) -> Self {
        var copy = self
        copy.provider = name
        return copy
    }
}
