import Testing
@testable import EventLoop

@Suite("Log line format")
struct LogFormatTests {
    private func line(_ fields: [(String, LogValue)], event: String = "request") -> String {
        var bytes: [UInt8] = []
        Log.format(.info, event, fields, into: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    @Test("a line is the time, level, event and each field in order, values typed, ending in a newline")
    func fieldsInOrder() {
        let text = line([("requestID", .string("k3F9xZ-0-1a")), ("status", .int(200)), ("bytesIn", .int(0)),
                         ("durationMs", .double(0.125)), ("cached", .bool(false)), ("delta", .int(-42)),
                         ("largest", .int(.max)), ("smallest", .int(.min))])
        #expect(text.hasPrefix("{\"time\":\""))
        #expect(text.hasSuffix("\",\"level\":\"info\",\"event\":\"request\",\"requestID\":\"k3F9xZ-0-1a\",\"status\":200,"
                               + "\"bytesIn\":0,\"durationMs\":0.125,\"cached\":false,\"delta\":-42,"
                               + "\"largest\":9223372036854775807,\"smallest\":-9223372036854775808}\n"))
    }

    @Test("strings that need it are escaped, keys and the event too; a non-finite number is null")
    func escaping() {
        let text = line([("pa\"th", .string("/a\\b\"c\n\t\u{1}é")), ("ratio", .double(.nan))], event: "odd\"event")
        #expect(text.contains("\"event\":\"odd\\\"event\",\"pa\\\"th\":\"/a\\\\b\\\"c\\n\\t\\u0001é\",\"ratio\":null}\n"))
    }

    @Test("the time is RFC 3339 UTC with milliseconds")
    func timestamp() {
        let text = line([])
        let time = text.dropFirst("{\"time\":\"".count).prefix(24)
        #expect(time.count == 24 && time.hasSuffix("Z"))
        let shape = time.map { $0.isNumber ? "9" : String($0) }.joined()
        #expect(shape == "9999-99-99T99:99:99.999Z")
    }

    @Test("a line as long as its worst case (every byte escaped as \\u00XX) fits the bound it is built in")
    func worstCaseFits() {
        let controls = String(repeating: "\u{1}", count: 5_000)
        let long = String(repeating: "p", count: 20_000)
        let text = line([(controls, .string(controls)), ("path", .string(long)), ("n", .int(.min)), ("d", .double(-1e-300))],
                        event: controls)
        #expect(text.utf8.count > 6 * 15_000 + 20_000)
        #expect(text.contains("\"path\":\"\(long)\""))
        #expect(text.contains("\"\(String(repeating: "\\u0001", count: 5_000))\":\""))
        #expect(text.hasSuffix(",\"n\":-9223372036854775808,\"d\":-1e-300}\n"))
    }
}
