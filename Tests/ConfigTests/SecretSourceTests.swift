import Foundation
import Testing

@testable import Config

struct SecretSourceTests {
    @Test(
        "a file secret resolves relative to the config directory with trailing whitespace trimmed, and is re-read each time"
    )
    func fileSecret() throws {
        let dir = try makeTemporaryDirectory()
        defer { removeTemporaryDirectory(dir) }
        try "  tok en \r\n\n\t ".write(toFile: dir + "/token.txt", atomically: true, encoding: .utf8)
        let config = try #require(validConfig(#"{"apiKey": {"file": "token.txt"}}"#, directory: dir))
        let source = try #require(config.apiKey)
        #expect(source == .file(dir + "/token.txt"))
        #expect(try source.resolve() == "  tok en")
        try "rotated\n".write(toFile: dir + "/token.txt", atomically: true, encoding: .utf8)
        #expect(try source.resolve() == "rotated")
    }

    @Test("an empty or whitespace-only secret file is an error at load")
    func emptyFile() throws {
        let dir = try makeTemporaryDirectory()
        defer { removeTemporaryDirectory(dir) }
        try "\n \n".write(toFile: dir + "/empty.txt", atomically: true, encoding: .utf8)
        #expect(
            configErrors(#"{"apiKey": {"file": "empty.txt"}}"#, directory: dir)
                == ["apiKey: the file \(dir)/empty.txt is empty"])
    }

    @Test("an env secret keeps the variable's name, not its value")
    func envSecret() throws {
        let config = try #require(validConfig(#"{"apiKey": {"env": "PROXY_KEY"}}"#, env: ["PROXY_KEY": "k"]))
        #expect(config.apiKey == .env("PROXY_KEY"))
    }

    @Test("resolve reads the real process environment and names a missing variable")
    func resolveProcessEnvironment() throws {
        let name = "PLATFORM_PROXY_TEST_\(UInt32.random(in: 0...UInt32.max))"
        #expect(throws: ConfigError(path: "", message: "environment variable \(name) is not set")) {
            try SecretSource.env(name).resolve()
        }
        #expect(try SecretSource.env("PATH").resolve().isEmpty == false)
        #expect(try SecretSource.literal("x").resolve() == "x")
    }

    @Test(
        "a token is resolved only when every byte can go in a header; the error gives the offset, not the token",
        arguments: [
            ("tok-A.b_c~d+e/f=", nil), ("tok en", 3), ("tok\r\nX-Injected: 1", 3), ("tok\u{0}", 3),
            ("\ttok", 0), ("tok\u{7F}", 3), ("tok\u{E9}", 3), ("t\u{FF0E}k", 1),
        ] as [(String, Int?)])
    func tokenBytes(value: String, offset: Int?) {
        let source = SecretSource.literal(value)
        do {
            #expect(try source.resolveToken() == value)
            #expect(offset == nil)
        } catch {
            #expect(error.message.contains("offset \(offset ?? -1);"), "\(error.message)")
            #expect(!error.message.contains(value), "the token is named")
        }
        #expect(SecretSource.isHeaderToken(value) == (offset == nil))
    }

    @Test("a static provider's tokens and demo tokens must be header-safe at load; other secrets need not be")
    func tokenKeysAtLoad() {
        #expect(
            configErrors(#"{"provider": {"grant": "static", "accessToken": "a b"}}"#).first?
                .hasPrefix(
                    "provider.accessToken: the token (<literal>) has a space, control or non-ASCII byte at offset 1")
                == true)
        #expect(
            configErrors(#"{"provider": {"grant": "static", "accessToken": "ok", "idToken": "x\u0000"}}"#).first?
                .hasPrefix("provider.idToken:") == true)
        #expect(validConfig(#"{"apiKey": "with space"}"#) != nil)
    }

    @Test("a secret's description never shows a literal value")
    func descriptionHidesSecrets() {
        #expect(SecretSource.literal("hunter2").description == "<literal>")
        #expect(SecretSource.env("K").description == "env K")
        let config = ProxyConfiguration(configDirectory: "/", apiKey: .literal("hunter2"))
        #expect(!String(describing: config).contains("hunter2"))
    }
}
