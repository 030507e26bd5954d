import Testing

@testable import Analytics

struct AnalyticsKeysTests {
    let keys = AnalyticsKeys(root: "pennmobile")

    @Test(
        "normalize prefixes the root once and turns spaces into underscores",
        arguments: [
            ("dining.kcech.appear", "pennmobile.dining.kcech.appear"),
            ("pennmobile.dining.appear", "pennmobile.dining.appear"),
            ("pennmobile", "pennmobile"),
            ("pennmobilex.a", "pennmobile.pennmobilex.a"),
            ("home", "pennmobile.home"),
            ("dining hall.kcech  view", "pennmobile.dining_hall.kcech__view"),
            ("pennmobile.é.ü", "pennmobile.é.ü"),
        ])
    func normalizes(raw: String, expected: String) {
        #expect(keys.normalize(raw) == .success(expected))
    }

    @Test(
        "normalize rejects malformed keys, naming the problem",
        arguments: [
            ("", "key: is empty"),
            ("a..b", "key: has an empty segment (\"..\")"),
            (".a", "key: starts with \".\""),
            ("a.", "key: ends with \".\""),
            (".", "key: starts with \".\""),
            ("a.\u{7}b", "key: contains a control character"),
            ("a\nb", "key: contains a control character"),
        ])
    func rejects(raw: String, message: String) {
        #expect(keys.normalize(raw) == .failure(AnalyticsKeyError(message: message)))
    }

    @Test("the 256-byte limit counts UTF-8 bytes after the root and underscores")
    func lengthLimit() {
        let room = 256 - "pennmobile.".utf8.count
        #expect(keys.normalize(String(repeating: "a", count: room)).map(\.utf8.count) == .success(256))
        #expect(
            keys.normalize(String(repeating: "a", count: room + 1))
                == .failure(
                    AnalyticsKeyError(message: "key: the key is 257 bytes after normalisation; the limit is 256")))
        // "é" is two bytes: half as many characters fit.
        #expect(keys.normalize(String(repeating: "é", count: room / 2)).map(\.utf8.count) == .success(255))
        if case .success = keys.normalize(String(repeating: "é", count: room / 2 + 1)) {
            Issue.record("a 257-byte key of two-byte characters was accepted")
        }
        // A key already under the root gets no prefix, so it may use the full 256 bytes itself.
        let rooted = "pennmobile." + String(repeating: "b", count: room)
        #expect(keys.normalize(rooted) == .success(rooted))
    }

    @Test("a dotted root is matched segment by segment")
    func dottedRoot() {
        let nested = AnalyticsKeys(root: "labs.mobile")
        #expect(nested.normalize("labs.mobile.a") == .success("labs.mobile.a"))
        #expect(nested.normalize("labs.a") == .success("labs.mobile.labs.a"))
        #expect(
            nested.operationSearch(path: "labs.mobile.x", operation: "op")
                == .success([
                    "labs.mobile.x.operation.op", "labs.mobile.operation.op", "labs.mobile.global.operation.op",
                ]))
    }

    @Test("event keys are <root>.<path>.event.<event>")
    func eventKeys() {
        #expect(
            keys.eventKey(path: "dining.kcech", event: "buttonPressed")
                == .success("pennmobile.dining.kcech.event.buttonPressed"))
        #expect(
            keys.eventKey(path: "pennmobile.dining", event: "tap twice")
                == .success("pennmobile.dining.event.tap_twice"))
        #expect(keys.eventKey(path: "", event: "x") == .failure(AnalyticsKeyError(message: "path: is empty")))
        #expect(
            keys.eventKey(path: "a..b", event: "x")
                == .failure(AnalyticsKeyError(message: "path: has an empty segment (\"..\")")))
        #expect(
            keys.eventKey(path: "a", event: "")
                == .failure(AnalyticsKeyError(message: "event: is empty")))
        #expect(
            keys.eventKey(path: "a", event: "b.c")
                == .failure(AnalyticsKeyError(message: "event: must be a single segment, without \".\"")))
        // 11 ("pennmobile.") + path + 7 (".event.") + 1 ("e") bytes.
        #expect(keys.eventKey(path: String(repeating: "p", count: 237), event: "e").map(\.utf8.count) == .success(256))
        #expect(
            keys.eventKey(path: String(repeating: "p", count: 238), event: "e")
                == .failure(
                    AnalyticsKeyError(
                        message: "path and event: the key is 257 bytes after normalisation; the limit is 256")))
    }

    @Test("operation keys: path-scoped, or global when the path is nil or empty")
    func operationKeys() {
        #expect(
            keys.operationKey(path: "testing.operationview", operation: "testing")
                == .success("pennmobile.testing.operationview.operation.testing"))
        #expect(keys.operationKey(path: nil, operation: "testing") == .success("pennmobile.global.operation.testing"))
        #expect(keys.operationKey(path: "", operation: "testing") == .success("pennmobile.global.operation.testing"))
        #expect(
            keys.operationKey(path: "a", operation: "")
                == .failure(AnalyticsKeyError(message: "operation: is empty")))
        #expect(
            keys.operationKey(path: "a.", operation: "x")
                == .failure(AnalyticsKeyError(message: "path: ends with \".\"")))
        #expect(
            keys.operationKey(path: "a", operation: "b.c")
                == .failure(AnalyticsKeyError(message: "operation: must be a single segment, without \".\"")))
        // 11 ("pennmobile.") + path + 11 (".operation.") + 1 ("x") bytes; parents are shorter.
        #expect(
            keys.operationSearch(path: String(repeating: "p", count: 233), operation: "x").map(\.count) == .success(3))
        #expect(
            keys.operationSearch(path: String(repeating: "p", count: 234), operation: "x")
                == .failure(
                    AnalyticsKeyError(
                        message: "path and operation: the key is 257 bytes after normalisation; the limit is 256")))
    }

    @Test("the finish search runs from the path up through each parent to the root, then global")
    func operationSearch() {
        #expect(
            keys.operationSearch(path: "testing.operationview.subview", operation: "testing")
                == .success([
                    "pennmobile.testing.operationview.subview.operation.testing",
                    "pennmobile.testing.operationview.operation.testing",
                    "pennmobile.testing.operation.testing",
                    "pennmobile.operation.testing",
                    "pennmobile.global.operation.testing",
                ]))
        #expect(
            keys.operationSearch(path: "pennmobile.a", operation: "x")
                == .success(["pennmobile.a.operation.x", "pennmobile.operation.x", "pennmobile.global.operation.x"]))
        #expect(
            keys.operationSearch(path: "pennmobile", operation: "x")
                == .success(["pennmobile.operation.x", "pennmobile.global.operation.x"]))
        #expect(keys.operationSearch(path: nil, operation: "x") == .success(["pennmobile.global.operation.x"]))
        // "global" as a path is the global key itself; it is not listed twice.
        #expect(
            keys.operationSearch(path: "global", operation: "x")
                == .success(["pennmobile.global.operation.x", "pennmobile.operation.x"]))
    }

    @Test("the one-pass event key agrees with the general rules on every input it takes, and leaves the rest to them")
    func plainEventKeyAgrees() {
        let keys = AnalyticsKeys(root: "pennmobile", maxKeyBytes: 40)
        // Pieces that exercise every rule: dots (leading, trailing, doubled), spaces, controls,
        // DEL, non-ASCII, the root itself and near misses of it, and lengths around the limit.
        let pieces = [
            "a", "dining", ".", " ", "\u{1}", "\u{7f}", "é", "pennmobile", "pennmobilex", "pennmobile.",
            "kcech", "x", "0123456789abcdef",
        ]
        var plain = 0
        func check(_ path: String, _ event: String) {
            let general = keys.cleanedEventKey(path: path, event: event)
            if let fast = keys.plainEventKey(path: path, event: event) {
                plain += 1
                #expect(general == .success(fast), "path \(path.debugDescription) event \(event.debugDescription)")
            } else if case .success(let key) = general {
                // Left to the general rules only when they rewrite something (a space).
                #expect(
                    path.contains(" ") || event.contains(" "),
                    "path \(path.debugDescription) event \(event.debugDescription) gave \(key)")
            }
            #expect(keys.eventKey(path: path, event: event) == general)
        }
        // Each rule once, across every event shape.
        for path in [
            "a", "a..b", ".a", "a.", ".", "a b", "a\u{1}", "a\u{7f}", "pennmobile", "pennmobile.x", "pennmobilex",
            "pennmobile..x", "é.x", String(repeating: "p", count: 24), String(repeating: "p", count: 23),
        ] {
            for event in ["x", "", "x.y", "x y", "\u{1f}", "é"] { check(path, event) }
        }
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<4000 {
            let path = (0..<Int.random(in: 0...4, using: &generator)).map { _ in
                pieces.randomElement(using: &generator)!
            }.joined()
            let event = (0..<Int.random(in: 0...2, using: &generator)).map { _ in
                pieces.randomElement(using: &generator)!
            }.joined()
            check(path, event)
        }
        #expect(plain > 200)
    }
}
