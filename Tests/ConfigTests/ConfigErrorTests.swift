import Testing

@testable import Config

struct ConfigErrorTests {
    @Test("a config with five different mistakes yields five errors, each naming its path")
    func fiveMistakes() {
        let errors = configErrors(
            """
            {
              "workers": -1,
              "limits": {"maxBodyBytes": "big"},
              "routes": [
                {"name": "a", "path": "/a/", "upstream": "ftp://example.com/"},
                {"name": "b", "path": "/b/", "upstream": "https://example.com/", "redirects": {"folow": true}}
              ],
              "gate": {"mode": "sometimes"}
            }
            """)
        #expect(
            errors == [
                "workers: expected an integer from 0 to 1024, not -1",
                "gate.mode: expected \"reject\" or \"wait\", not \"sometimes\"",
                "limits.maxBodyBytes: expected a non-negative integer, not a string",
                "routes[0].upstream: expected an absolute http or https URL, but the scheme \"ftp\" is not http or https",
                "routes[1].redirects.folow: unknown key; did you mean \"follow\"?",
            ])
    }

    static let cases: [(json: String, errors: [String])] = [
        ("{\"listn\": []}", ["listn: unknown key; did you mean \"listen\"?"]),
        ("{\"Workers\": 1}", ["Workers: unknown key; did you mean \"workers\"?"]),
        ("{\"zzz\": 1, \"odd key\": 2}", ["zzz: unknown key", "[\"odd key\"]: unknown key"]),
        ("{\"limits\": {\"maxBodyBytes\": -5}}", ["limits.maxBodyBytes: expected a non-negative integer, not -5"]),
        ("{\"limits\": {\"maxBodyBytes\": 1.5}}", ["limits.maxBodyBytes: expected a non-negative integer, not 1.5"]),
        ("{\"limits\": {\"maxBodyBytes\": 1e3}}", []),
        (
            "{\"limits\": {\"maxBodyBytes\": 9223372036854775808}}",
            ["limits.maxBodyBytes: expected a non-negative integer, not 9223372036854775808"]
        ),
        (
            "{\"limits\": {\"maxHeaderBytes\": 100}}",
            ["limits.maxHeaderBytes: expected an integer from 1024 to 16777216, not 100"]
        ),
        (
            "{\"limits\": {\"maxConnections\": 0}}",
            ["limits.maxConnections: expected an integer from 1 to 1000000, not 0"]
        ),
        (
            "{\"limits\": {\"headerTimeoutSeconds\": 0}}",
            ["limits.headerTimeoutSeconds: expected a number of seconds greater than 0, not 0"]
        ),
        (
            "{\"limits\": {\"idleTimeoutSeconds\": \"60\"}}",
            ["limits.idleTimeoutSeconds: expected a number of seconds greater than 0, not a string"]
        ),
        ("{\"limits\": {\"idleTimeoutSeconds\": 2.5, \"headerTimeoutSeconds\": 0.25}}", []),
        (
            "{\"limits\": {\"idleTimeoutSeconds\": 1e12}}",
            ["limits.idleTimeoutSeconds: must be at most 1000000000 seconds"]
        ),
        ("{\"limits\": []}", ["limits: expected an object, not an array"]),
        ("{\"gate\": {\"waitSeconds\": -1}}", ["gate.waitSeconds: expected a number of seconds (0 or more), not -1"]),
        ("{\"gate\": {\"mode\": \"wait\", \"waitSeconds\": 0}}", []),
        ("{\"mock\": \"yes\"}", ["mock: expected true or false, not a string"]),
        ("{\"workers\": 2000}", ["workers: expected an integer from 0 to 1024, not 2000"]),
        ("{\"stateDirectory\": \"\"}", ["stateDirectory: must not be empty"]),
        ("{\"listen\": []}", ["listen: must list at least one address"]),
        ("{\"listen\": \"127.0.0.1:8080\"}", ["listen: expected an array, not a string"]),
        (
            "{\"listen\": [\"example.com:80\"]}",
            [
                "listen[0]: \"example.com:80\" is not a listen address: the host must be an IP address or \"localhost\" (IPv6 in brackets)"
            ]
        ),
        (
            "{\"listen\": [\"127.0.0.1:70000\", 8080]}",
            [
                "listen[0]: \"127.0.0.1:70000\" is not a listen address: the port must be a number from 0 to 65535",
                "listen[1]: expected a string, not a number",
            ]
        ),
        ("{\"listen\": [\"127.0.0.1:8080\", \"127.0.0.1:8080\"]}", ["listen[1]: 127.0.0.1:8080 is listed twice"]),
        (
            "{\"allowedHosts\": [\"localhost:8080\", \"bad host\", \"[::1]\"]}",
            [
                "allowedHosts[0]: \"localhost:8080\" must be a host without a port (the Host header's port is ignored)",
                "allowedHosts[1]: \"bad host\" is not a host name or IP address (IPv6 in brackets)",
            ]
        ),
        ("{\"allowedHosts\": []}", ["allowedHosts: must list at least one host"]),
        ("{\"apiKey\": \"\"}", ["apiKey: must not be empty"]),
        ("{\"apiKey\": 5}", ["apiKey: expected a string, {\"env\": \"NAME\"} or {\"file\": \"path\"}, not a number"]),
        ("{\"apiKey\": {\"env\": \"NOT_SET\"}}", ["apiKey: environment variable NOT_SET is not set"]),
        ("{\"apiKey\": {\"env\": \"EMPTY\"}}", ["apiKey: environment variable EMPTY is empty"]),
        ("{\"apiKey\": {\"env\": \"KEY\"}}", []),
        ("{\"apiKey\": {\"env\": \"KEY\", \"file\": \"k\"}}", ["apiKey: give either \"env\" or \"file\", not both"]),
        ("{\"apiKey\": {}}", ["apiKey: expected {\"env\": \"NAME\"} or {\"file\": \"path\"}"]),
        (
            "{\"apiKey\": {\"evn\": \"KEY\"}}",
            [
                "apiKey.evn: unknown key; did you mean \"env\"?",
                "apiKey: expected {\"env\": \"NAME\"} or {\"file\": \"path\"}",
            ]
        ),
        (
            "{\"apiKey\": {\"file\": \"/nonexistent/key.txt\"}}",
            ["apiKey: cannot read /nonexistent/key.txt: No such file or directory"]
        ),
        ("[]", ["the config must be a JSON object, not an array"]),
        ("{\"a\": 1,}", ["invalid JSON at line 1, column 9: trailing comma before '}'"]),
        ("{\n  \"workers\": 1,\n  \"workers\": 2\n}", ["invalid JSON at line 3, column 3: duplicate key \"workers\""]),
        ("", ["invalid JSON at line 1, column 1: unexpected end of input"]),
    ]

    @Test("each bad config in the table yields exactly its expected errors", arguments: cases)
    func table(json: String, expected: [String]) {
        #expect(configErrors(json, env: ["KEY": "secret", "EMPTY": ""]) == expected)
    }

    @Test("ConfigErrors describes one problem per line")
    func descriptionOnePerLine() {
        guard case .failure(let errors) = parseConfig("{\"workers\": true, \"mock\": 1}") else {
            Issue.record("expected errors")
            return
        }
        #expect(
            errors.description == """
                workers: expected an integer from 0 to 1024, not a boolean
                mock: expected true or false, not a number
                """)
        #expect(
            errors.errors[0]
                == ConfigError(path: "workers", message: "expected an integer from 0 to 1024, not a boolean"))
    }

    @Test("loading a file that does not exist is a config error naming the file")
    func missingFile() {
        guard case .failure(let errors) = ConfigLoader.load(path: "/nonexistent/dir/proxy.json") else {
            Issue.record("expected errors")
            return
        }
        #expect(
            errors.errors == [
                ConfigError(path: "", message: "cannot read /nonexistent/dir/proxy.json: No such file or directory")
            ])
    }

    @Test("loading a directory instead of a file is a config error, not a crash")
    func directoryAsFile() {
        guard case .failure(let errors) = ConfigLoader.load(path: "/") else {
            Issue.record("expected errors")
            return
        }
        #expect(errors.errors.first?.message.hasPrefix("cannot read /:") == true)
    }
}
