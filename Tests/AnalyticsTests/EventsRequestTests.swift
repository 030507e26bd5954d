import Testing

@testable import Analytics

struct EventsRequestTests {
    let keys = AnalyticsKeys(root: "pennmobile")
    let now: Int64 = 1_700_000_000

    func parse(_ body: String) -> Result<[AnalyticsValue], EventsRequestError> {
        EventsRequest.parse(Array(body.utf8), keys: keys, now: now)
    }

    @Test("the documented example: event form and key form, with value and timestamp defaults")
    func specExample() {
        let result = parse(
            """
            {"events":[{"path":"dining.kcech","event":"buttonPressed","value":"1"},{"key":"dining.kcech.appear"}]}
            """)
        #expect(
            result
                == .success([
                    AnalyticsValue(key: "pennmobile.dining.kcech.event.buttonPressed", value: "1", timestamp: now),
                    AnalyticsValue(key: "pennmobile.dining.kcech.appear", value: "1", timestamp: now),
                ]))
    }

    @Test(
        "values and timestamps are accepted in their documented shapes",
        arguments: [
            (#"{"key":"a","value":"hello"}"#, "hello", Int64(1_700_000_000)),
            (#"{"key":"a","value":""}"#, "", 1_700_000_000),
            (#"{"key":"a","value":42}"#, "42", 1_700_000_000),
            (#"{"key":"a","value":1.50}"#, "1.50", 1_700_000_000),
            (#"{"key":"a","value":-3e2}"#, "-3e2", 1_700_000_000),
            (#"{"key":"a","value":null}"#, "1", 1_700_000_000),
            (#"{"key":"a","timestamp":1600000000}"#, "1", 1_600_000_000),
            (#"{"key":"a","timestamp":1600000000.9}"#, "1", 1_600_000_000),
            (#"{"key":"a","timestamp":1.6e9}"#, "1", 1_600_000_000),
            (#"{"key":"a","timestamp":1}"#, "1", 1),
            (#"{"key":"a","timestamp":1700086400}"#, "1", 1_700_086_400),
            (#"{"key":"a","timestamp":null}"#, "1", 1_700_000_000),
        ])
    func accepted(event: String, value: String, timestamp: Int64) {
        #expect(
            parse(#"{"events":[\#(event)]}"#)
                == .success([AnalyticsValue(key: "pennmobile.a", value: value, timestamp: timestamp)]))
    }

    @Test(
        "an event's problem is reported with its index and the field",
        arguments: [
            (#"{"key":"a","value":true}"#, "value: must be a string or a number, got a boolean"),
            (#"{"key":"a","value":{}}"#, "value: must be a string or a number, got an object"),
            (#"{"key":"a","timestamp":"1600000000"}"#, "timestamp: must be a number of Unix seconds, got a string"),
            (#"{"key":"a","timestamp":0}"#, "timestamp: must be after 1970 (greater than 0)"),
            (#"{"key":"a","timestamp":0.5}"#, "timestamp: must be after 1970 (greater than 0)"),
            (#"{"key":"a","timestamp":-5}"#, "timestamp: must be after 1970 (greater than 0)"),
            (#"{"key":"a","timestamp":-1e300}"#, "timestamp: must be after 1970 (greater than 0)"),
            (
                #"{"key":"a","timestamp":1700086401}"#,
                "timestamp: 1700086401 is more than a day in the future; it is Unix seconds"
            ),
            (
                #"{"key":"a","timestamp":1700000000000}"#,
                "timestamp: 1700000000000 is more than a day in the future; it is Unix seconds"
            ),
            (
                #"{"key":"a","timestamp":1e300}"#,
                "timestamp: 1e300 is more than a day in the future; it is Unix seconds"
            ),
            (#"{"key":"a","path":"b"}"#, "key: the key form cannot also carry path or event"),
            (#"{"key":"a","event":"b"}"#, "key: the key form cannot also carry path or event"),
            (#"{"path":"a"}"#, "event: missing"),
            (#"{"event":"a"}"#, "path: missing"),
            (#"{"value":"1"}"#, "key, or path and event: missing"),
            (#"{}"#, "key, or path and event: missing"),
            (#"{"key":"a","extra":1}"#, #""extra": unknown field; expected one of path, event, key, value, timestamp"#),
            (#"{"key":7}"#, "key: must be a string, got a number"),
            (#"{"path":["a"],"event":"b"}"#, "path: must be a string, got an array"),
            (#"{"key":"a..b"}"#, #"key: has an empty segment ("..")"#),
            (#"{"key":""}"#, "key: is empty"),
            (#"{"path":"a.","event":"b"}"#, #"path: ends with ".""#),
            (#"{"path":"a","event":"b.c"}"#, #"event: must be a single segment, without ".""#),
            (#""a""#, "must be an object, got a string"),
        ])
    func rejected(event: String, message: String) {
        #expect(
            parse(#"{"events":[{"key":"ok"},\#(event)]}"#) == .failure(EventsRequestError(index: 1, message: message)))
    }

    @Test(
        "body-level problems carry no index",
        arguments: [
            ("", "body: not valid JSON"),
            ("{", "body: not valid JSON"),
            ("[]", "body: must be a JSON object, got an array"),
            ("{}", "events: missing"),
            (#"{"events":null}"#, "events: missing"),
            (#"{"events":{}}"#, "events: must be an array, got an object"),
            (#"{"events":[],"more":1}"#, #""more": unknown field; expected one of events"#),
        ])
    func bodyErrors(body: String, prefix: String) throws {
        guard case .failure(let error) = parse(body) else {
            Issue.record("accepted \(body)")
            return
        }
        #expect(error.index == nil)
        #expect(error.message.hasPrefix(prefix))
        #expect(error.description == error.message)
    }

    @Test("an empty list is accepted")
    func emptyList() {
        #expect(parse(#"{"events":[]}"#) == .success([]))
    }

    @Test("at most 1000 events per request")
    func eventLimit() {
        func body(_ n: Int) -> String {
            #"{"events":["# + Array(repeating: #"{"key":"a"}"#, count: n).joined(separator: ",") + "]}"
        }
        #expect((try? parse(body(1000)).get().count) == 1000)
        #expect(
            parse(body(1001))
                == .failure(
                    EventsRequestError(
                        index: nil, message: "events: at most 1000 per request, got 1001",
                        tooLarge: true)))
    }

    @Test("values longer than the limit are refused as too large, naming the event")
    func valueLimit() {
        let limits = EventsRequest.Limits(maxEvents: 10, maxValueBytes: 4)
        let ok = EventsRequest.parse(
            Array(#"{"events":[{"key":"a","value":"1234"}]}"#.utf8), keys: AnalyticsKeys(root: "r"),
            now: 1_700_000_000, limits: limits)
        #expect((try? ok.get().count) == 1)
        let long = EventsRequest.parse(
            Array(#"{"events":[{"key":"a"},{"key":"b","value":"12345"}]}"#.utf8),
            keys: AnalyticsKeys(root: "r"), now: 1_700_000_000, limits: limits)
        #expect(
            long == .failure(EventsRequestError(index: 1, message: "value: 5 bytes; the limit is 4", tooLarge: true)))
    }

    @Test("the first bad event is the one reported")
    func firstErrorWins() {
        let result = parse(#"{"events":[{"key":"a"},{"key":"b"},{"key":""},{"key":"a..b"}]}"#)
        #expect(result == .failure(EventsRequestError(index: 2, message: "key: is empty")))
        if case .failure(let error) = result { #expect(error.description == "events[2]: key: is empty") }
    }
}
