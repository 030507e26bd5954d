import JSON

/// `profiles`: named JSON Merge Patches over the base config, one of which a run may select
/// (`--profile NAME` or `PLATFORM_PROXY_PROFILE`), with conventions built in for two names:
/// `test` turns mocks on (unless the profile sets `mock`) and analytics uploads off (unless it
/// sets `analytics.uploads`); `release` refuses any mock data or record mode.
public enum ConfigProfiles {
    /// The environment variable naming the profile when `--profile` is not given.
    public static let environmentVariable = "PLATFORM_PROXY_PROFILE"

    /// The profile names in `root`, in file order (empty when there is no `profiles` object).
    static func names(in root: JSONValue) -> [String] {
        root["profiles"]?.objectValue?.keys ?? []
    }

    /// The document to decode: the base without `profiles`, with `profile`'s patch and its
    /// conventions applied. Reports a malformed `profiles` object or an unknown name.
    static func select(_ profile: String?, in root: JSONValue, decoder: ConfigDecoder) -> JSONValue {
        guard case .object(var base) = root else { return root }
        let profiles = base["profiles"]
        base["profiles"] = nil
        var patches = JSONObject()
        if let profiles {
            if case .object(let object) = profiles {
                for (name, patch) in object {
                    let path = ConfigDecoder.path("profiles", name)
                    if !validName(name) {
                        decoder.report(path, "a profile name uses letters, digits, '-' and '_' only")
                    } else if case .object = patch {
                        patches[name] = patch
                    } else {
                        decoder.report(
                            path, "expected an object (a JSON Merge Patch of the config), not \(patch.kindDescription)")
                    }
                }
            } else if !profiles.isNull {
                decoder.report("profiles", "expected an object of named profiles, not \(profiles.kindDescription)")
            }
        }
        guard let profile else { return .object(base) }
        guard let patch = patches[profile] else {
            let known =
                patches.keys.isEmpty ? "the config defines none" : "have " + patches.keys.joined(separator: ", ")
            decoder.report("profiles", "no profile named \"\(profile)\" (\(known))")
            return .object(base)
        }
        var merged = MergePatch.apply(patch, to: .object(base))
        if profile == "test" { merged = testConventions(merged, patch: patch) }
        return merged
    }

    /// Under `test`: every route with a mock folder replays and nothing is uploaded, unless the
    /// profile says otherwise for that key.
    private static func testConventions(_ document: JSONValue, patch: JSONValue) -> JSONValue {
        guard case .object(var object) = document else { return document }
        if patch["mock"] == nil { object["mock"] = .bool(true) }
        if case .object(var analytics)? = object["analytics"], patch["analytics"]?["uploads"] == nil {
            analytics["uploads"] = .bool(false)
            object["analytics"] = .object(analytics)
        }
        return .object(object)
    }

    /// Under `release`: mock data must not ship, so the global switch and any route that would
    /// replay or record are errors.
    static func checkRelease(_ config: ProxyConfiguration, decoder: ConfigDecoder) {
        if config.mock { decoder.report("mock", "mocks are on, but mock data never ships in the release profile") }
        for (index, route) in config.routes.enumerated() {
            guard let mock = route.mock else { continue }
            if route.upstream == nil || mock.mode != .off {
                decoder.report(
                    "routes[\(index)].mock",
                    "mode \"\(route.upstream == nil ? "replay" : mock.mode.rawValue)\": "
                        + "mock data never ships in the release profile (set \"mode\": \"off\" or remove the mock)")
            }
        }
    }

    private static func validName(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= 64
            && name.utf8.allSatisfy { b in
                (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || b == 0x5F
                    || b == 0x2D
            }
    }
}
