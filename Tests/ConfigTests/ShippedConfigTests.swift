import Foundation
import Testing

@testable import Config

struct ShippedConfigTests {
    static let configDirectory = repositoryRoot().appendingPathComponent("Config")

    static var shippedFiles: [String] {
        let fm = FileManager.default
        let top = (try? fm.contentsOfDirectory(atPath: configDirectory.path)) ?? []
        let examples =
            (try? fm.contentsOfDirectory(atPath: configDirectory.appendingPathComponent("examples").path)) ?? []
        return (top.map { "Config/" + $0 } + examples.map { "Config/examples/" + $0 })
            .filter { $0.hasSuffix(".json") }.sorted()
    }

    @Test("Config/ holds the default config and the five examples")
    func filesPresent() {
        #expect(
            ShippedConfigTests.shippedFiles == [
                "Config/examples/client-credentials.json", "Config/examples/forgerock-journey.json",
                "Config/examples/generic-oidc.json",
                "Config/examples/pennlabs-platform.json", "Config/examples/several-providers.json",
                "Config/platform-proxy.json",
            ])
    }

    @Test("every config file shipped in Config/ and Config/examples/ passes the loader", arguments: shippedFiles)
    func shippedConfigLoads(file: String) {
        let path = repositoryRoot().appendingPathComponent(file).path
        let result = ConfigLoader.load(
            path: path,
            environment: { name in
                name == "PLATFORM_PROXY_CLIENT_SECRET" ? "example-secret" : nil
            })
        if case .failure(let errors) = result { Issue.record("\(file):\n\(errors)") }
    }

    @Test("the embedded default runs offline: static dev tokens from files, a local upstream and mock routes")
    func embeddedDefault() throws {
        let dir = ShippedConfigTests.configDirectory.path
        let config = try ConfigLoader.load(path: dir + "/platform-proxy.json").get()
        #expect(config.listen == [.tcp(host: "127.0.0.1", port: 8080)])
        #expect(config.stateDirectory == dir + "/state")
        let provider = try #require(config.provider)
        #expect(provider.grant == .staticTokens)
        #expect(provider.accessToken == .file(dir + "/dev-token.txt"))
        #expect(provider.idToken == .file(dir + "/dev-id-token.txt"))
        // No dead settings: a demo block is ignored under the static grant (check-config warns).
        #expect(provider.demo == nil)
        #expect(ConfigWarnings.of(config).isEmpty)
        #expect(config.routes.map(\.path) == ["/api/", "/Users/", "/Dining/"])
        #expect(config.routes[0].upstream?.description == "http://127.0.0.1:9000/")
        #expect(config.routes[0].credential == .accessToken)
        #expect(config.routes[1].mock == MockConfiguration(directory: dir + "/MockJSON/Users"))
        #expect(config.routes[2].mock == MockConfiguration(directory: dir + "/MockJSON/Dining"))
        for route in config.routes {
            if let host = route.upstream?.host { #expect(host == "127.0.0.1") }
        }
        #expect(config.analytics?.endpoint.host == "127.0.0.1")
        #expect(config.analytics?.root == "pennmobile")
        #expect(try provider.accessToken?.resolve().isEmpty == false)
    }

    @Test("the dev id token is an unsigned JWT for dev-user/devuser that does not expire this century")
    func devIDToken() throws {
        let token = try String(
            contentsOf: ShippedConfigTests.configDirectory.appendingPathComponent("dev-id-token.txt"), encoding: .utf8
        )
        .trimmingCharacters(in: .whitespacesAndNewlines)
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        #expect(parts.count == 3)
        func decode(_ part: Substring) throws -> [String: Any] {
            var base64 = part.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
            base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
            let data = try #require(Data(base64Encoded: base64))
            return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        }
        let header = try decode(parts[0])
        let claims = try decode(parts[1])
        #expect(header["alg"] as? String == "none")
        #expect(claims["sub"] as? String == "dev-user")
        #expect(claims["pennkey"] as? String == "devuser")
        #expect((claims["exp"] as? Int ?? 0) > 4_000_000_000)
    }

    @Test("every mock file shipped in Config/MockJSON is valid JSON")
    func mockFilesAreJSON() throws {
        let root = ShippedConfigTests.configDirectory.appendingPathComponent("MockJSON")
        let files =
            FileManager.default.enumerator(atPath: root.path)?.compactMap { $0 as? String }
            .filter { $0.hasSuffix(".json") } ?? []
        #expect(Set(files) == ["Users/me.json", "Users/list/01.json", "Users/list/02.json", "Dining/venues.json"])
        for file in files {
            let data = try Data(contentsOf: root.appendingPathComponent(file))
            #expect((try? JSONSerialization.jsonObject(with: data)) != nil, "\(file)")
        }
    }
}
