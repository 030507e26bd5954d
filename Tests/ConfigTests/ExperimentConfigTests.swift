import Testing

@testable import Config

struct ExperimentConfigTests {
    static func config(_ experiments: String) -> String { "{\"experiments\": {\(experiments)}}" }

    static let bad: [(experiments: String, errors: [String])] = [
        (#""a": {}"#, ["experiments.a.variants: is required"]),
        (#""a": {"variants": {}}"#, ["experiments.a.variants: must list at least one variant"]),
        (#""a": {"variants": []}"#, ["experiments.a.variants: expected an object of variant weights, not an array"]),
        (#""a": {"variants": {"x": 0, "y": 0}}"#, ["experiments.a.variants: at least one weight must be above 0"]),
        (
            #""a": {"variants": {"x": -1, "y": "5"}}"#,
            [
                "experiments.a.variants.x: expected a weight from 0 to 1000000000000, not -1",
                "experiments.a.variants.y: expected a weight (a number, 0 or more), not a string",
            ]
        ),
        (
            #""a b": {"variants": {"x.y": 1}}"#,
            [
                "experiments[\"a b\"]: an experiment name must be 1 to 48 letters, digits, '_' or '-'",
                "experiments[\"a b\"].variants[\"x.y\"]: a variant name must be 1 to 48 letters, digits, '_' or '-'",
            ]
        ),
        (#""a": {"variants": {"x": 1}, "weights": {}}"#, ["experiments.a.weights: unknown key"]),
        (
            #""a": {"variants": {"x": 1}, "start": "2026-11-01"}"#,
            [
                "experiments.a.start: expected an ISO 8601 date-time with a zone, such as \"2026-11-01T00:00:00Z\", not \"2026-11-01\""
            ]
        ),
        (
            #""a": {"variants": {"x": 1}, "start": "2026-11-02T00:00:00Z", "end": "2026-11-01T00:00:00Z"}"#,
            ["experiments.a.end: must be later than start"]
        ),
        (
            #""a": {"variants": {"x": 1}, "enabled": "yes", "salt": 3}"#,
            [
                "experiments.a.salt: expected a string, not a number",
                "experiments.a.enabled: expected true or false, not a string",
            ]
        ),
    ]

    @Test("each bad experiment yields exactly its expected errors, at JSON paths", arguments: bad)
    func badExperiments(experiments: String, expected: [String]) {
        #expect(configErrors(Self.config(experiments)) == expected)
    }

    @Test("experiments keep config order, variants keep theirs, defaults fill the rest")
    func parsed() throws {
        let config = try #require(
            validConfig(
                Self.config(
                    """
                    "onboarding-v2": {"variants": {"control": 50, "new": 50}, "salt": "2026-11", "enabled": true,
                                      "start": "2026-11-01T00:00:00Z", "end": "2026-12-01T00:00:00+01:00"},
                    "a_b": {"variants": {"z": 1, "a": 0.5}}
                    """)))
        #expect(config.experiments.map(\.name) == ["onboarding-v2", "a_b"])
        let first = config.experiments[0]
        #expect(first.variants == [.init(name: "control", weight: 50), .init(name: "new", weight: 50)])
        #expect(first.salt == "2026-11" && first.enabled)
        #expect(first.start == 1_793_491_200)
        #expect(first.end == Double(1_796_083_200 - 3600))
        let second = config.experiments[1]
        #expect(second.variants.map(\.name) == ["z", "a"])
        #expect(second.salt == "" && second.enabled && second.start == nil && second.end == nil)
    }

    @Test("experimentHeader is a route key, false by default")
    func routeKey() throws {
        let config = try #require(
            validConfig(
                """
                {"routes": [{"name": "a", "path": "/a/", "upstream": "http://x/", "experimentHeader": true},
                            {"name": "b", "path": "/b/", "upstream": "http://x/"}]}
                """))
        #expect(config.routes.map(\.experimentHeader) == [true, false])
        #expect(
            configErrors(#"{"routes": [{"name": "a", "path": "/a/", "upstream": "http://x/", "experimentHeader": 1}]}"#)
                == ["routes[0].experimentHeader: expected true or false, not a number"])
    }

    @Test("RFC 3339 date-times: zones, fractions, leap years; anything else is refused")
    func timestamps() {
        #expect(RFC3339.parse("1970-01-01T00:00:00Z") == 0)
        #expect(RFC3339.parse("2026-11-01t00:00:00z") == 1_793_491_200)
        #expect(RFC3339.parse("2026-11-01T01:30:00+01:30") == 1_793_491_200)
        #expect(RFC3339.parse("1969-12-31T23:59:59.5Z") == -0.5)
        #expect(RFC3339.parse("2024-02-29T12:00:00-05:00") == 1_709_226_000)
        for bad in [
            "2023-02-29T00:00:00Z", "2026-11-01T00:00:00", "2026-11-01 00:00:00Z", "2026-13-01T00:00:00Z",
            "2026-11-01T24:00:00Z", "2026-11-01T00:00:00.Z", "2026-11-01T00:00:00+0100", "2026-11-01T00:00:00Zx", "",
        ] {
            #expect(RFC3339.parse(bad) == nil, "\(bad)")
        }
    }
}
