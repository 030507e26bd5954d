import Glibc
import Synchronization
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
        let text = line([
            ("requestID", .string("k3F9xZ-0-1a")), ("status", .int(200)), ("bytesIn", .int(0)),
            ("durationMs", .double(0.125)), ("cached", .bool(false)), ("delta", .int(-42)),
            ("largest", .int(.max)), ("smallest", .int(.min)),
        ])
        #expect(text.hasPrefix("{\"time\":\""))
        #expect(
            text.hasSuffix(
                "\",\"level\":\"info\",\"event\":\"request\",\"requestID\":\"k3F9xZ-0-1a\",\"status\":200,"
                    + "\"bytesIn\":0,\"durationMs\":0.125,\"cached\":false,\"delta\":-42,"
                    + "\"largest\":9223372036854775807,\"smallest\":-9223372036854775808}\n"))
    }

    @Test("strings that need it are escaped, keys and the event too; a non-finite number is null")
    func escaping() {
        let text = line([("pa\"th", .string("/a\\b\"c\n\t\u{1}é")), ("ratio", .double(.nan))], event: "odd\"event")
        #expect(
            text.contains("\"event\":\"odd\\\"event\",\"pa\\\"th\":\"/a\\\\b\\\"c\\n\\t\\u0001é\",\"ratio\":null}\n"))
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
        let text = line(
            [(controls, .string(controls)), ("path", .string(long)), ("n", .int(.min)), ("d", .double(-1e-300))],
            event: controls)
        #expect(text.utf8.count > 6 * 15_000 + 20_000)
        #expect(text.contains("\"path\":\"\(long)\""))
        #expect(text.contains("\"\(String(repeating: "\\u0001", count: 5_000))\":\""))
        #expect(text.hasSuffix(",\"n\":-9223372036854775808,\"d\":-1e-300}\n"))
    }
}

@Suite("Log lines written field by field")
struct LogLineFieldTests {
    /// The line `fields` writes, without its time.
    private func line(_ fields: (inout LogLine) -> Void) -> String {
        var text = LogLine(capacity: 8)
        text.begin(.info, "request")
        fields(&text)
        text.end()
        return text.withBytes { String(decoding: $0, as: UTF8.self) }
    }

    @Test(
        "thousandths are written as Swift writes that Double",
        arguments: [
            0, 1, 7, 10, 12, 100, 120, 125, 999, 1000, 1001, 1010,
            1100, 12345, 999_999, 1_000_000, 86_400_000, 123_456_789_012,
        ])
    func thousandths(value: Int) {
        #expect(line { $0.field("d", thousandths: value) }.hasSuffix(",\"d\":\(String(Double(value) / 1000))}\n"))
        #expect(line { $0.field("d", thousandths: -value) }.hasSuffix(",\"d\":\(String(Double(-value) / 1000))}\n"))
    }

    @Test("every duration from 0 to 20 s in microseconds reads as the Double the access log used to write")
    func everyDuration() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<5_000 {
            let micros = Int.random(in: 0...20_000_000, using: &generator)
            let written = line { $0.field("durationMs", thousandths: micros) }
            #expect(written.hasSuffix(",\"durationMs\":\(String(Double(micros) / 1e3))}\n"), "\(micros)")
        }
    }

    @Test("a line written field by field is the line the fields array makes, escaping included")
    func sameAsFieldsArray() {
        let path: Substring = "/a\"b\\c\u{1}/é"[...]
        let method = Array("GET".utf8)
        let byFields = line { line in
            line.field("requestID", "k3F9xZ-0-1a")
            method.withUnsafeBufferPointer { line.field("method", bytes: $0) }
            line.field("path", path)
            line.field("status", 200)
            line.field("durationMs", thousandths: 1250)
            line.field("upstream", joining: "http://127.0.0.1:8081", "/x\"y")
        }
        var array: [UInt8] = []
        Log.format(
            .info, "request",
            [
                ("requestID", .string("k3F9xZ-0-1a")), ("method", .string("GET")), ("path", .string(String(path))),
                ("status", .int(200)), ("durationMs", .double(1.25)),
                ("upstream", .string("http://127.0.0.1:8081/x\"y")),
            ], into: &array)
        let fromArray = String(decoding: array, as: UTF8.self)
        // The time differs (and may cross a millisecond): compare from the level on.
        #expect(byFields.drop { $0 != "," } == fromArray.drop { $0 != "," })
    }

    @Test("a line longer than the memory it started with grows it, and many lines queue whole")
    func grows() {
        let long = String(repeating: "p", count: 100_000)
        let text = line { line in
            for i in 0..<100 { line.field("n", i) }
            line.field("path", long)
        }
        #expect(text.hasSuffix(",\"path\":\"\(long)\"}\n"))
        #expect(text.contains(",\"n\":0,\"n\":1,") && text.contains(",\"n\":99,"))
    }
}

@Suite("Log line memory")
struct LogLineMemoryTests {
    @Test("after a burst past the limit the memory goes back to what it was made with, and lines still write")
    func shrinksAfterBurst() {
        var line = LogLine(capacity: 128)
        line.begin(.info, "request")
        line.field("path", String(repeating: "p", count: 4_000))
        line.end()
        #expect(line.count > 4_000)
        #expect(line.capacity > 4_000)
        line.removeAll(shrinkingAbove: 1_024)
        #expect(line.count == 0 && line.capacity == 128)
        line.begin(.info, "request")
        line.field("n", 7)
        line.end()
        #expect(line.withBytes { String(decoding: $0, as: UTF8.self) }.hasSuffix(",\"n\":7}\n"))
    }
}

@Suite("Log writes from several threads")
struct LogWriteInterleavingTests {
    @Test(
        "a 64 KiB flush and lines written at once from other threads never splice into each other (a pipe takes 4 KiB whole)"
    )
    func linesStayWhole() throws {
        var fds: [CInt] = [0, 0]
        #expect(pipe(&fds) == 0)
        let (readEnd, writeEnd) = (fds[0], fds[1])
        // A flush: about 64 KiB of 100-byte lines of "a" (not a divisor of the pipe's 4 KiB
        // pages, so a write cut at a page ends mid-line); a line at once: 40 bytes of "b".
        let flush = Array((String(repeating: "a", count: 99) + "\n").utf8)
        let block = Array([[UInt8]](repeating: flush, count: 655).joined())
        let single = Array((String(repeating: "b", count: 39) + "\n").utf8)
        let received = Mutex<[UInt8]>([])
        // A slow reader: the pipe fills, so a large write waits part way through, when another
        // writer's bytes could be taken in between.
        let reader = try Threads.spawn {
            var buffer = [UInt8](repeating: 0, count: 4_096)
            while true {
                let n = buffer.withUnsafeMutableBytes { read(readEnd, $0.baseAddress!, $0.count) }
                if n <= 0 { break }
                received.withLock { $0.append(contentsOf: buffer[..<n]) }
                usleep(500)
            }
        }
        var writers: [pthread_t] = []
        for index in 0..<4 {
            writers.append(
                try Threads.spawn {
                    for _ in 0..<(index < 2 ? 10 : 4_000) {
                        (index < 2 ? block : single).withUnsafeBytes { Log.write($0, to: writeEnd) }
                    }
                })
        }
        for writer in writers { pthread_join(writer, nil) }
        close(writeEnd)
        pthread_join(reader, nil)
        close(readEnd)
        let lines = received.withLock { $0 }.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
            .dropLast()
        let whole = lines.allSatisfy { line in
            (line.count == 99 && line.allSatisfy { $0 == UInt8(ascii: "a") })
                || (line.count == 39 && line.allSatisfy { $0 == UInt8(ascii: "b") })
        }
        #expect(whole)
        #expect(lines.count == 2 * 10 * 655 + 2 * 4_000)
    }
}
