import JSON
import Testing

@testable import Config

/// JSON Merge Patch (RFC 7396) and the `profiles` rules.
struct ProfileTests {
    /// RFC 7396 Appendix A, the whole table.
    static let rfcExamples: [(String, String, String)] = [
        (#"{"a":"b"}"#, #"{"a":"c"}"#, #"{"a":"c"}"#),
        (#"{"a":"b"}"#, #"{"b":"c"}"#, #"{"a":"b","b":"c"}"#),
        (#"{"a":"b"}"#, #"{"a":null}"#, #"{}"#),
        (#"{"a":"b","b":"c"}"#, #"{"a":null}"#, #"{"b":"c"}"#),
        (#"{"a":["b"]}"#, #"{"a":"c"}"#, #"{"a":"c"}"#),
        (#"{"a":"c"}"#, #"{"a":["b"]}"#, #"{"a":["b"]}"#),
        (#"{"a":{"b":"c"}}"#, #"{"a":{"b":"d","c":null}}"#, #"{"a":{"b":"d"}}"#),
        (#"{"a":[{"b":"c"}]}"#, #"{"a":[1]}"#, #"{"a":[1]}"#),
        (#"["a","b"]"#, #"["c","d"]"#, #"["c","d"]"#),
        (#"{"a":"b"}"#, #"["c"]"#, #"["c"]"#),
        (#"{"a":"foo"}"#, "null", "null"),
        (#"{"a":"foo"}"#, #""bar""#, #""bar""#),
        (#"{"e":null}"#, #"{"a":1}"#, #"{"e":null,"a":1}"#),
        (#"[1,2]"#, #"{"a":"b","c":null}"#, #"{"a":"b"}"#),
        (#"{}"#, #"{"a":{"bb":{"ccc":null}}}"#, #"{"a":{"bb":{}}}"#),
    ]

    @Test("merge patch follows RFC 7396 appendix A", arguments: rfcExamples)
    func mergePatch(target: String, patch: String, result: String) throws {
        let merged = MergePatch.apply(
            try JSONValue.parse(Array(patch.utf8)), to: try JSONValue.parse(Array(target.utf8)))
        #expect(merged == (try JSONValue.parse(Array(result.utf8))))
    }

    static let document = """
        {"listen": ["127.0.0.1:8080"], "workers": 2,
         "routes": [{"name": "api", "path": "/api/", "upstream": "http://127.0.0.1:9/", "credential": "none",
                     "mock": {"directory": "m", "mode": "off"}}],
         "analytics": {"root": "app", "endpoint": "http://127.0.0.1:9/a/", "credential": "none"},
         "profiles": {"test": {}, "quiet": {"workers": 1, "analytics": null},
                      "release": {}, "leaky": {"mock": true}, "test2": {"mock": false}}}
        """

    func load(_ profile: String?, _ json: String = document) -> Result<ProxyConfiguration, ConfigErrors> {
        ConfigLoader.parse(
            Array(json.utf8), configDirectory: testDirectory, environment: { _ in nil }, profile: profile)
    }

    @Test("the base ignores profiles; a profile patches it and is recorded")
    func selection() throws {
        let base = try load(nil).get()
        #expect(base.workers == 2 && base.analytics != nil && base.profile == nil)
        #expect(base.profileNames == ["test", "quiet", "release", "leaky", "test2"])
        let quiet = try load("quiet").get()
        #expect(quiet.workers == 1 && quiet.analytics == nil && quiet.profile == "quiet")
    }

    @Test("test: mocks on and uploads off, unless the profile says otherwise")
    func testConventions() throws {
        let test = try load("test").get()
        #expect(test.mock == true)
        #expect(test.analytics?.uploads == false)
        let explicit = try load(
            "test",
            Self.document.replacingOccurrences(
                of: #""test": {}"#,
                with: #""test": {"mock": false, "analytics": {"uploads": true}}"#)
        ).get()
        #expect(explicit.mock == false && explicit.analytics?.uploads == true)
        #expect(try load("test2").get().analytics?.uploads == true, "the conventions belong to the name test only")
    }

    @Test("release: mocks and record mode are errors; a mock folder switched off is not")
    func releaseRules() throws {
        #expect((try? load("release").get()) != nil)
        let replay = Self.document.replacingOccurrences(of: #""mode": "off""#, with: #""mode": "replay""#)
        guard case .failure(let errors) = load("release", replay) else { Issue.record("replay passed release"); return }
        #expect(errors.errors.map(\.path) == ["routes[0].mock"])
        let leaky = Self.document.replacingOccurrences(of: #""release": {}"#, with: #""release": {"mock": true}"#)
        guard case .failure(let mockErrors) = load("release", leaky) else {
            Issue.record("mock passed release"); return
        }
        #expect(mockErrors.errors.map(\.path) == ["mock"])
    }

    @Test("an unknown profile, a bad name or a non-object patch is reported with its path")
    func badProfiles() {
        guard case .failure(let unknown) = load("nope") else { Issue.record("unknown profile passed"); return }
        #expect(
            unknown.errors.map(\.description) == [
                #"profiles: no profile named "nope" (have test, quiet, release, leaky, test2)"#
            ])
        guard case .failure(let shape) = load(nil, #"{"profiles": {"ok": [], "bad name": {}}}"#) else {
            Issue.record("bad profiles passed")
            return
        }
        #expect(shape.errors.map(\.path) == ["profiles.ok", #"profiles["bad name"]"#])
    }
}
