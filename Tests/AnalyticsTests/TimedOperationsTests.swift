import Testing

@testable import Analytics

/// A manual monotonic clock in nanoseconds.
private let ms: Int64 = 1_000_000

struct TimedOperationsTests {
    let keys = AnalyticsKeys(root: "pennmobile")

    func key(_ path: String?, _ operation: String) throws -> String {
        try keys.operationKey(path: path, operation: operation).get()
    }

    func search(_ path: String?, _ operation: String) throws -> [String] {
        try keys.operationSearch(path: path, operation: operation).get()
    }

    @Test("finish from a child path finds the parent's operation and reports whole milliseconds")
    func childFindsParent() throws {
        var operations = TimedOperations()
        operations.begin(
            key: try key("testing.operationview", "testing"), cancelOn: [.background, .inactive], now: 5 * ms)
        let finished = operations.finish(
            searchingFrom: try search("testing.operationview.subview", "testing"), now: 1_239 * ms + 999_999)
        #expect(finished?.key == "pennmobile.testing.operationview.operation.testing")
        #expect(finished?.milliseconds == 1_234)
        #expect(operations.count == 0)
        #expect(
            operations.finish(searchingFrom: try search("testing.operationview.subview", "testing"), now: 2_000 * ms)
                == nil)
    }

    @Test("the most specific running key wins over a parent's")
    func mostSpecificFirst() throws {
        var operations = TimedOperations()
        operations.begin(key: try key("a", "op"), cancelOn: [], now: 0)
        operations.begin(key: try key("a.b", "op"), cancelOn: [], now: 10 * ms)
        #expect(
            operations.finish(searchingFrom: try search("a.b.c", "op"), now: 30 * ms)?.key
                == "pennmobile.a.b.operation.op")
        #expect(
            operations.finish(searchingFrom: try search("a.b.c", "op"), now: 30 * ms)?.key
                == "pennmobile.a.operation.op")
    }

    @Test("operations begun with no path are global and found from any path")
    func global() throws {
        var operations = TimedOperations()
        operations.begin(key: try key(nil, "booking"), cancelOn: [], now: 0)
        let finished = operations.finish(searchingFrom: try search("dining.kcech", "booking"), now: 2 * ms)
        #expect(finished?.key == "pennmobile.global.operation.booking")
        #expect(finished?.milliseconds == 2)
        #expect(operations.finish(searchingFrom: try search(nil, "booking"), now: 3 * ms) == nil)
    }

    @Test("an unknown operation, or one begun on a sibling path, is not found")
    func unknown() throws {
        var operations = TimedOperations()
        operations.begin(key: try key("a.sibling", "op"), cancelOn: [], now: 0)
        #expect(operations.finish(searchingFrom: try search("a.other", "op"), now: ms) == nil)
        #expect(operations.finish(searchingFrom: try search("a.sibling", "other"), now: ms) == nil)
        #expect(operations.cancel(searchingFrom: try search("a", "op")) == nil)
        #expect(operations.count == 1)
    }

    @Test("beginning a running key restarts it, with the new cancelOn")
    func restart() throws {
        var operations = TimedOperations()
        let k = try key("a", "op")
        operations.begin(key: k, cancelOn: [.background], now: 0)
        operations.begin(key: k, cancelOn: [], now: 100 * ms)
        #expect(operations.count == 1)
        #expect(operations.phase(.background).isEmpty)
        #expect(operations.finish(searchingFrom: [k], now: 150 * ms)?.milliseconds == 50)
    }

    @Test("cancel drops exactly one operation, the most specific")
    func cancel() throws {
        var operations = TimedOperations()
        operations.begin(key: try key("a", "op"), cancelOn: [], now: 0)
        operations.begin(key: try key(nil, "op"), cancelOn: [], now: 0)
        #expect(operations.cancel(searchingFrom: try search("a.b", "op")) == "pennmobile.a.operation.op")
        #expect(operations.count == 1)
        #expect(operations.cancel(searchingFrom: try search("a.b", "op")) == "pennmobile.global.operation.op")
        #expect(operations.cancel(searchingFrom: try search("a.b", "op")) == nil)
    }

    @Test("a phase cancels only the operations registered for it")
    func phase() throws {
        var operations = TimedOperations()
        operations.begin(key: try key("b", "op"), cancelOn: [.background, .inactive], now: 0)
        operations.begin(key: try key("a", "op"), cancelOn: [.background], now: 0)
        operations.begin(key: try key("c", "op"), cancelOn: [.inactive], now: 0)
        operations.begin(key: try key("d", "op"), cancelOn: [], now: 0)
        #expect(operations.phase(.active).isEmpty)
        #expect(operations.phase(.background) == ["pennmobile.a.operation.op", "pennmobile.b.operation.op"])
        #expect(operations.phase(.background).isEmpty)
        #expect(operations.phase(.inactive) == ["pennmobile.c.operation.op"])
        #expect(operations.count == 1)
        #expect(operations.finish(searchingFrom: try search("d", "op"), now: 7 * ms)?.milliseconds == 7)
    }

    @Test(
        "durations are floored to whole milliseconds and never negative",
        arguments: [
            (0, 999_999, 0),
            (0, 1_000_000, 1),
            (1_500_000, 3_499_999, 1),
            (10 * ms, 5 * ms, 0),
            (Int64.min, Int64.max, 0),
        ] as [(Int64, Int64, Int64)])
    func durations(start: Int64, end: Int64, expected: Int64) {
        var operations = TimedOperations()
        operations.begin(key: "k", cancelOn: [], now: start)
        #expect(operations.finish(searchingFrom: ["k"], now: end)?.milliseconds == expected)
    }

    @Test("past the limit the longest-running operation is forgotten")
    func limit() {
        var operations = TimedOperations(limit: 3)
        for i in 0..<3 { operations.begin(key: "k\(i)", cancelOn: [], now: Int64(i)) }
        operations.begin(key: "k1", cancelOn: [], now: 10)
        #expect(operations.count == 3)
        operations.begin(key: "k3", cancelOn: [], now: 11)
        #expect(operations.count == 3)
        #expect(operations.cancel(searchingFrom: ["k0"]) == nil)
        #expect(operations.cancel(searchingFrom: ["k2"]) == "k2")
    }
}

struct OperationRequestTests {
    func parse(_ body: String, begin: Bool = true) -> Result<OperationRequest, EventsRequestError> {
        OperationRequest.parse(Array(body.utf8), requireCancelOnAllowed: begin)
    }

    @Test("begin, finish and cancel bodies")
    func accepted() {
        #expect(
            parse(#"{"path":"testing.operationview","operation":"testing","cancelOn":["background","inactive"]}"#)
                == .success(
                    OperationRequest(
                        path: "testing.operationview", operation: "testing", cancelOn: [.background, .inactive])))
        #expect(
            parse(#"{"operation":"x","cancelOn":["active","active"]}"#)
                == .success(OperationRequest(path: nil, operation: "x", cancelOn: [.active])))
        #expect(
            parse(#"{"path":null,"operation":"x","cancelOn":null}"#)
                == .success(OperationRequest(path: nil, operation: "x", cancelOn: [])))
        #expect(
            parse(#"{"path":"a.b","operation":"x"}"#, begin: false)
                == .success(OperationRequest(path: "a.b", operation: "x", cancelOn: [])))
    }

    @Test(
        "bad bodies name the field",
        arguments: [
            (#"{"path":"a"}"#, true, "operation: missing"),
            (#"{"operation":""}"#, true, "operation: is empty"),
            (#"{"operation":3}"#, true, "operation: must be a string, got a number"),
            (#"{"operation":"x","path":false}"#, true, "path: must be a string, got a boolean"),
            (#"{"operation":"x","cancelOn":"background"}"#, true, "cancelOn: must be an array of phases, got a string"),
            (
                #"{"operation":"x","cancelOn":["sleeping"]}"#, true,
                #"cancelOn: must be one of background, inactive, active, got "sleeping""#
            ),
            (
                #"{"operation":"x","cancelOn":[1]}"#, true,
                "cancelOn: must be one of background, inactive, active, got a number"
            ),
            (
                #"{"operation":"x","cancelOn":[]}"#, false,
                #""cancelOn": unknown field; expected one of path, operation"#
            ),
            (
                #"{"operation":"x","name":"y"}"#, true,
                #""name": unknown field; expected one of path, operation, cancelOn"#
            ),
            ("[]", true, "body: must be a JSON object, got an array"),
        ])
    func rejected(body: String, begin: Bool, message: String) {
        #expect(parse(body, begin: begin) == .failure(EventsRequestError(index: nil, message: message)))
    }

    @Test("phase bodies")
    func phases() {
        for phase in AppPhase.allCases {
            #expect(PhaseRequest.parse(Array(#"{"phase":"\#(phase.rawValue)"}"#.utf8)) == .success(phase))
        }
        #expect(
            PhaseRequest.parse(Array("{}".utf8)) == .failure(EventsRequestError(index: nil, message: "phase: missing")))
        #expect(
            PhaseRequest.parse(Array(#"{"phase":"Background"}"#.utf8))
                == .failure(
                    EventsRequestError(
                        index: nil, message: #"phase: must be one of background, inactive, active, got "Background""#)))
        if case .success = PhaseRequest.parse(Array("not json".utf8)) { Issue.record("accepted a non-JSON body") }
    }
}

struct DedupBufferTests {
    /// Feeds `(key, timestamp)` pairs in order and returns which were admitted.
    func admit(_ buffer: inout DedupBuffer, _ values: [(String, Int64)]) -> [Bool] {
        values.map { buffer.admit(key: $0.0, timestamp: $0.1) }
    }

    @Test("a repeat within the interval of the last accepted value is dropped; at or past it, kept")
    func window() {
        var buffer = DedupBuffer(intervalSeconds: 5)
        // "a" at 105 is measured from the last accepted value (100), not the last dropped one (104).
        let admitted = admit(
            &buffer, [("a", 100), ("a", 100), ("a", 104), ("b", 104), ("a", 105), ("a", 109), ("a", 111)])
        #expect(admitted == [true, false, false, true, true, false, true])
    }

    @Test("back-dated values are compared with the newest accepted one and never move it back")
    func backdated() {
        var buffer = DedupBuffer(intervalSeconds: 5)
        #expect(admit(&buffer, [("a", 100), ("a", 97), ("a", 50), ("a", 102)]) == [true, false, true, false])
    }

    @Test(
        "fractional, zero and negative intervals",
        arguments: [
            (0.0, [true, true, true, true]),
            (-1.0, [true, true, true, true]),
            (0.5, [true, false, true, true]),
            (1.5, [true, false, false, true]),
        ])
    func intervals(interval: Double, expected: [Bool]) {
        var buffer = DedupBuffer(intervalSeconds: interval)
        #expect(admit(&buffer, [("k", 10), ("k", 10), ("k", 11), ("k", 12)]) == expected)
    }

    @Test("keys an interval older than the newest value are evicted once the table has filled")
    func eviction() {
        var buffer = DedupBuffer(intervalSeconds: 5)
        let old = admit(&buffer, (0..<1024).map { ("old\($0)", 100) })
        #expect(old.allSatisfy { $0 })
        #expect(buffer.count == 1024)
        #expect(admit(&buffer, [("fresh", 200)]) == [true])
        #expect(buffer.count == 1)
        // Keys still inside the interval survive the next sweeps.
        _ = admit(&buffer, (0..<2047).map { ("new\($0)", 200) })
        #expect(buffer.count == 2048)
        #expect(admit(&buffer, [("later", 203), ("fresh", 203), ("old0", 203)]) == [true, false, true])
        #expect(buffer.count == 2050)
    }

    @Test("at most maxKeys are kept, the oldest dropped first")
    func keyCap() {
        var buffer = DedupBuffer(intervalSeconds: 1_000, maxKeys: 8)
        let admitted = admit(&buffer, (0..<100).map { ("k\($0)", Int64(1_000 + $0)) })
        #expect(admitted.allSatisfy { $0 })
        #expect(buffer.count <= 8)
        // The newest keys are still remembered, so their repeats are still dropped; the oldest are forgotten.
        #expect(admit(&buffer, [("k99", 1_099), ("k98", 1_099), ("k0", 1_099)]) == [false, false, true])
    }
}
