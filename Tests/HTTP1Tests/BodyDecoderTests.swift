import Testing

@testable import HTTP1

/// Chunked, Content-Length and close-delimited bodies; chunked rows fed whole and one byte at a time.
@Suite("Body decoder")
struct BodyDecoderTests {
    static let valid: [BodyCase] = [
        BodyCase("one chunk", "5\r\nhello\r\n0\r\n\r\n", body("hello")),
        BodyCase("several chunks", "5\r\nhello\r\n1\r\n \r\n5\r\nworld\r\n0\r\n\r\n", body("hello world")),
        BodyCase("empty body", "0\r\n\r\n", body("")),
        BodyCase(
            "chunk data holding CRLFs and a fake last chunk", "8\r\n\r\n0\r\n\r\nX\r\n0\r\n\r\n", body("\r\n0\r\n\r\nX")
        ),
        BodyCase(
            "extensions with token and quoted values", "5;a=b;c=\"q\\\"x\"\r\nhello\r\n0;last\r\n\r\n", body("hello")),
        BodyCase("extension name only, then several", "5;a;b=c;d\r\nhello\r\n0\r\n\r\n", body("hello")),
        BodyCase(
            "quoted extension with escaped backslash and ; inside", "5;n=\"a\\\\;b\"\r\nhello\r\n0\r\n\r\n",
            body("hello")),
        BodyCase("uppercase hex size", "A\r\n0123456789\r\n0\r\n\r\n", body("0123456789")),
        BodyCase("lowercase hex size", "b\r\nhello world\r\n0\r\n\r\n", body("hello world")),
        BodyCase("leading zero sizes", "0005\r\nhello\r\n000\r\n\r\n", body("hello")),
        BodyCase("trailers present", "5\r\nhello\r\n0\r\nX-Trailer: v\r\nChecksum:abc\r\n\r\n", body("hello")),
        BodyCase("trailer with empty value", "0\r\nX-Empty:\r\n\r\n", body("")),
        BodyCase(
            "chunk of 256 bytes", "100\r\n" + String(repeating: "z", count: 256) + "\r\n0\r\n\r\n",
            body(String(repeating: "z", count: 256))),
        BodyCase(
            "binary chunk data", bytes: Array("3\r\n".utf8) + [0x00, 0xFF, 0x0A] + Array("\r\n0\r\n\r\n".utf8),
            .body([0x00, 0xFF, 0x0A])),
        BodyCase("Content-Length body", "hello world", body("hello world"), framing: .length(11)),
        BodyCase("Content-Length body of one byte", "x", body("x"), framing: .length(1)),
        BodyCase("no body", "", body(""), framing: .none),
        BodyCase("Content-Length 0", "", body(""), framing: .length(0)),
    ]

    static let longExtension = "5;" + String(repeating: "e", count: 5000) + "\r\nhello\r\n0\r\n\r\n"
    static let longTrailer = "0\r\nX-Big: " + String(repeating: "t", count: 33_000) + "\r\n\r\n"

    static let invalid: [BodyCase] = [
        BodyCase("bare semicolon extension", "5;\r\nhello\r\n0\r\n\r\n", .invalid(.invalidChunkExtension)),
        BodyCase("extension with an empty value", "5;a=\r\nhello\r\n0\r\n\r\n", .invalid(.invalidChunkExtension)),
        BodyCase("extension with whitespace", "5; a=b\r\nhello\r\n0\r\n\r\n", .invalid(.invalidChunkExtension)),
        BodyCase(
            "extension with a control character", "5;a=\u{1}\r\nhello\r\n0\r\n\r\n", .invalid(.invalidChunkExtension)),
        BodyCase(
            "quoted extension with a control character", "5;a=\"x\u{1}\"\r\nhello\r\n0\r\n\r\n",
            .invalid(.invalidChunkExtension)),
        BodyCase("unterminated quoted extension", "5;a=\"x\r\nhello\r\n0\r\n\r\n", .invalid(.invalidChunkExtension)),
        BodyCase("bare LF inside an extension", "5;a\nhello\r\n0\r\n\r\n", .invalid(.invalidChunkExtension)),
        BodyCase("bare CR inside an extension", "5;a\rX\r\nhello\r\n0\r\n\r\n", .invalid(.bareCR)),
        BodyCase("extension over the limit", longExtension, .invalid(.chunkExtensionTooLong)),
        BodyCase("chunk size with 0x prefix", "0x5\r\nhello\r\n0\r\n\r\n", .invalid(.invalidChunkSize)),
        BodyCase("chunk size with leading space", " 5\r\nhello\r\n0\r\n\r\n", .invalid(.invalidChunkSize)),
        BodyCase("chunk size with trailing space", "5 \r\nhello\r\n0\r\n\r\n", .invalid(.invalidChunkSize)),
        BodyCase("chunk size with underscore", "1_0\r\n0123456789abcdef\r\n0\r\n\r\n", .invalid(.invalidChunkSize)),
        BodyCase("negative chunk size", "-5\r\nhello\r\n0\r\n\r\n", .invalid(.invalidChunkSize)),
        BodyCase("plus-signed chunk size", "+5\r\nhello\r\n0\r\n\r\n", .invalid(.invalidChunkSize)),
        BodyCase("empty chunk size", "\r\nhello\r\n0\r\n\r\n", .invalid(.invalidChunkSize)),
        BodyCase("non-hex chunk size", "g\r\nhello\r\n0\r\n\r\n", .invalid(.invalidChunkSize)),
        BodyCase(
            "chunk size overflow, 17 hex digits", "10000000000000000\r\nx\r\n0\r\n\r\n", .invalid(.chunkSizeOverflow)),
        BodyCase(
            "chunk size overflow, 16 f digits", "ffffffffffffffff\r\nx\r\n0\r\n\r\n", .invalid(.chunkSizeOverflow)),
        BodyCase("chunk size wrapping to 5", "10000000000000005\r\nhello\r\n0\r\n\r\n", .invalid(.chunkSizeOverflow)),
        BodyCase("data longer than declared (spill)", "3\r\nhello\r\n0\r\n\r\n", .invalid(.missingChunkTerminator)),
        BodyCase("missing CRLF after data", "5\r\nhello0\r\n\r\n", .invalid(.missingChunkTerminator)),
        BodyCase("bare LF after data", "5\r\nhello\n0\r\n\r\n", .invalid(.missingChunkTerminator)),
        BodyCase("bare CR after data", "5\r\nhello\r0\r\n\r\n", .invalid(.missingChunkTerminator)),
        BodyCase("bare LF after the size", "5\nhello\r\n0\r\n\r\n", .invalid(.invalidChunkSize)),
        BodyCase("bare CR terminating the size", "5\rhello\r\n0\r\n\r\n", .invalid(.bareCR)),
        BodyCase("bare CR terminating the last chunk", "0\r\r\n", .invalid(.bareCR)),
        BodyCase("bare CR ending the body", "0\r\n\rX", .invalid(.bareCR)),
        BodyCase("bare LF ending the body", "0\r\n\n", .invalid(.invalidTrailer)),
        BodyCase("bare CR ending a trailer", "0\r\nX: a\rY: b\r\n\r\n", .invalid(.bareCR)),
        BodyCase("trailer without a colon", "0\r\nNoColon\r\n\r\n", .invalid(.invalidTrailer)),
        BodyCase("trailer with whitespace before the colon", "0\r\nX : a\r\n\r\n", .invalid(.invalidTrailer)),
        BodyCase("trailer with an empty name", "0\r\n: a\r\n\r\n", .invalid(.invalidTrailer)),
        BodyCase("trailer with obs-fold", "0\r\nX: a\r\n b\r\n\r\n", .invalid(.invalidTrailer)),
        BodyCase("trailer with NUL in the value", "0\r\nX: a\u{0}\r\n\r\n", .invalid(.invalidTrailer)),
        BodyCase("trailer over the limit", longTrailer, .invalid(.trailerTooLarge)),
    ]

    /// Feeds a case whole and one byte at a time; both must agree with the table.
    static func check(_ c: BodyCase, sourceLocation: SourceLocation = #_sourceLocation) {
        for step in [max(c.bytes.count, 1), 1] {
            let run = decodeGrowing(c.bytes, framing: c.framing, step: step)
            switch c.expected {
            case .body(let expected):
                #expect(run.data == expected, "step \(step): \(run)", sourceLocation: sourceLocation)
                #expect(run.ended && run.error == nil, "step \(step): \(run)", sourceLocation: sourceLocation)
                #expect(
                    run.consumed == c.bytes.count && run.unfed == 0, "step \(step): \(run)",
                    sourceLocation: sourceLocation)
            case .invalid(let error):
                #expect(run.error == error, "step \(step): \(run)", sourceLocation: sourceLocation)
                #expect(!run.ended, "step \(step): \(run)", sourceLocation: sourceLocation)
            }
        }
    }

    @Test("well-formed body is decoded, whole and byte at a time", arguments: valid)
    func decodesValidBody(_ c: BodyCase) {
        Self.check(c)
    }

    @Test("malformed chunked framing is refused", arguments: invalid)
    func refusesChunkedSmugglingAttempt(_ c: BodyCase) {
        Self.check(c)
    }

    @Test("every split of a chunked body decodes the same", arguments: [2, 3, 4, 5, 7, 11, 16])
    func chunkedSplits(_ step: Int) {
        let raw = Array("5;x=y\r\nhello\r\n6\r\n world\r\n0\r\nT: v\r\n\r\n".utf8)
        let run = decodeGrowing(raw, framing: .chunked, step: step)
        #expect(run.data == Array("hello world".utf8))
        #expect(run.ended && run.consumed == raw.count)
    }

    @Test("bytes after a chunked body are left for the next request")
    func chunkedStopsAtEnd() {
        let bodyBytes = "5\r\nhello\r\n0\r\n\r\n"
        let raw = Array((bodyBytes + "GET / HTTP/1.1\r\n").utf8)
        for step in [raw.count, 1, 4] {
            let run = decodeGrowing(raw, framing: .chunked, step: step)
            #expect(run.ended && run.data == Array("hello".utf8))
            #expect(run.consumed == bodyBytes.utf8.count, "step \(step)")
        }
    }

    @Test("a Content-Length body split across buffers stops at its length", arguments: Array(1...14))
    func contentLengthSplits(_ step: Int) {
        let raw = Array("0123456789GET".utf8)
        let run = decodeGrowing(raw, framing: .length(10), step: step)
        #expect(run.data == Array("0123456789".utf8))
        #expect(run.ended && run.error == nil)
        #expect(run.consumed == 10)
    }

    @Test("Content-Length: data ranges index the buffer passed in, .end comes on the next call")
    func contentLengthRanges() {
        var decoder = HTTPBodyDecoder(framing: .length(5))
        let first = Array("abc".utf8)
        var step = first.withUnsafeBytes { decoder.decode($0) }
        #expect(step.consumed == 3 && step.event == .data(0..<3))
        #expect(!decoder.isComplete)
        let second = Array("deXYZ".utf8)
        step = second.withUnsafeBytes { decoder.decode($0) }
        #expect(step.consumed == 2 && step.event == .data(0..<2))
        #expect(decoder.isComplete)
        step = Array("XYZ".utf8).withUnsafeBytes { decoder.decode($0) }
        #expect(step.consumed == 0 && step.event == .end)
        #expect(decoder.peerClosed() == .end)
    }

    @Test("chunked: data range points past the size line in the same buffer")
    func chunkedRanges() {
        var decoder = HTTPBodyDecoder(framing: .chunked)
        let buffer = Array("5\r\nhel".utf8)
        let step = buffer.withUnsafeBytes { decoder.decode($0) }
        #expect(step.consumed == 6 && step.event == .data(3..<6))
        let empty = [UInt8]()
        let next = empty.withUnsafeBytes { decoder.decode($0) }
        #expect(next.consumed == 0 && next.event == .needMore)
    }

    @Test("a close-delimited body ends when the peer closes")
    func untilClose() {
        var decoder = HTTPBodyDecoder(framing: .untilClose)
        var collected: [UInt8] = []
        for part in ["abc", "", "defg"] {
            let bytes = Array(part.utf8)
            let step = bytes.withUnsafeBytes { decoder.decode($0) }
            #expect(step.consumed == bytes.count)
            switch step.event {
            case .data(let r): collected += bytes[r]
            case .needMore: #expect(bytes.isEmpty)
            default: Issue.record("unexpected \(step.event)")
            }
        }
        #expect(!decoder.isComplete)
        #expect(decoder.peerClosed() == .end)
        #expect(decoder.isComplete)
        #expect(collected == Array("abcdefg".utf8))
    }

    @Test(
        "the peer closing in the middle of a chunked body is a truncation",
        arguments: ["", "5", "5\r\nhe", "5\r\nhello\r\n", "0\r\n", "0\r\nX: y\r\n"])
    func peerClosedMidChunked(_ prefix: String) {
        var decoder = HTTPBodyDecoder(framing: .chunked)
        let bytes = Array(prefix.utf8)
        let step = bytes.withUnsafeBytes { decoder.decode($0) }
        #expect(step.event != .end)
        #expect(decoder.peerClosed() == .invalid(.missingChunkTerminator))
        #expect(!decoder.isComplete)
    }

    @Test("the peer closing in the middle of a Content-Length body is a truncation")
    func peerClosedMidLength() {
        var decoder = HTTPBodyDecoder(framing: .length(10))
        _ = Array("abc".utf8).withUnsafeBytes { decoder.decode($0) }
        #expect(decoder.peerClosed() == .invalid(.missingChunkTerminator))
    }

    @Test("the extension and trailer limits are exact")
    func limitBoundaries() {
        // maxExtensionBytes counts the extension after the size, ";" included.
        let atLimit = Array(("5;" + String(repeating: "a", count: 7) + "\r\nhello\r\n0\r\n\r\n").utf8)
        #expect(decodeGrowing(atLimit, framing: .chunked, step: 1, maxExtensionBytes: 8).ended)
        let overLimit = Array(("5;" + String(repeating: "a", count: 8) + "\r\nhello\r\n0\r\n\r\n").utf8)
        #expect(
            decodeGrowing(overLimit, framing: .chunked, step: 1, maxExtensionBytes: 8).error == .chunkExtensionTooLong)
        // maxTrailerBytes counts trailer field bytes, line endings excluded.
        let trailerAtLimit = Array("0\r\nX:12345678\r\nY:1234567890\r\n\r\n".utf8)
        #expect(decodeGrowing(trailerAtLimit, framing: .chunked, step: 1, maxTrailerBytes: 22).ended)
        #expect(
            decodeGrowing(trailerAtLimit, framing: .chunked, step: 1, maxTrailerBytes: 21).error == .trailerTooLarge)
    }
}
