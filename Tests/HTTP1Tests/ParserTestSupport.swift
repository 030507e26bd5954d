import Testing

@testable import HTTP1

/// The observable meaning of a parsed head, comparable with `==`.
struct HeadSummary: Equatable, CustomStringConvertible {
    var method: String
    var target: String
    var version: HTTPVersion
    var framing: BodyFraming
    var keepAlive: Bool
    var expectsContinue: Bool

    init(_ head: HTTPRequestHead) {
        self.init(
            head.method, head.target, head.version, framing: head.framing,
            keepAlive: head.keepAlive, expectsContinue: head.expectsContinue)
    }

    init(
        _ method: String, _ target: String, _ version: HTTPVersion, framing: BodyFraming,
        keepAlive: Bool, expectsContinue: Bool
    ) {
        self.method = method
        self.target = target
        self.version = version
        self.framing = framing
        self.keepAlive = keepAlive
        self.expectsContinue = expectsContinue
    }

    var description: String {
        "\(method) \(target) HTTP/\(version.major).\(version.minor) framing=\(framing) keepAlive=\(keepAlive) continue=\(expectsContinue)"
    }
}

/// A `HeadParseResult` reduced to something `Equatable`.
enum HeadOutcome: Equatable, CustomStringConvertible {
    case complete(HeadSummary, consumed: Int)
    case incomplete
    case invalid(HTTPParseError)

    init(_ result: HeadParseResult) {
        switch result {
        case .complete(let head, let consumed): self = .complete(HeadSummary(head), consumed: consumed)
        case .incomplete: self = .incomplete
        case .invalid(let error): self = .invalid(error)
        }
    }

    var description: String {
        switch self {
        case .complete(let s, let consumed): "complete(\(s), consumed: \(consumed))"
        case .incomplete: "incomplete"
        case .invalid(let e): "invalid(\(e))"
        }
    }
}

/// One row of a head table: raw bytes and the one outcome they must produce.
struct HeadCase: Sendable, CustomTestStringConvertible {
    enum Expected: Sendable {
        case complete(
            method: String, target: String, version: HTTPVersion, framing: BodyFraming, keepAlive: Bool,
            expectsContinue: Bool)
        case invalid(HTTPParseError)
    }

    let name: String
    let bytes: [UInt8]
    let expected: Expected
    var limits = HTTPHeadLimits()

    init(_ name: String, _ raw: String, _ expected: Expected, limits: HTTPHeadLimits = HTTPHeadLimits()) {
        self.init(name, bytes: Array(raw.utf8), expected, limits: limits)
    }

    init(_ name: String, bytes: [UInt8], _ expected: Expected, limits: HTTPHeadLimits = HTTPHeadLimits()) {
        self.name = name
        self.bytes = bytes
        self.expected = expected
        self.limits = limits
    }

    var testDescription: String { name }

    /// The outcome a whole feed must produce.
    var expectedOutcome: HeadOutcome {
        switch expected {
        case .complete(let m, let t, let v, let f, let k, let c):
            .complete(HeadSummary(m, t, v, framing: f, keepAlive: k, expectsContinue: c), consumed: bytes.count)
        case .invalid(let e):
            .invalid(e)
        }
    }
}

/// Shorthand for a complete outcome; defaults are a body-less keep-alive HTTP/1.1 request.
func ok(
    _ method: String = "GET", _ target: String = "/", _ version: HTTPVersion = .http11,
    framing: BodyFraming = .none, keepAlive: Bool = true, expectsContinue: Bool = false
) -> HeadCase.Expected {
    .complete(
        method: method, target: target, version: version, framing: framing, keepAlive: keepAlive,
        expectsContinue: expectsContinue)
}

/// Shorthand for an invalid outcome.
func fails(_ error: HTTPParseError) -> HeadCase.Expected { .invalid(error) }

/// Parses `bytes` given all at once with a fresh parser.
func parseWhole(_ bytes: [UInt8], limits: HTTPHeadLimits = HTTPHeadLimits()) -> HeadOutcome {
    var parser = HTTPRequestHeadParser(limits: limits)
    return bytes.withUnsafeBytes { HeadOutcome(parser.parse($0)) }
}

/// Parses the whole head, returning the head itself for field-level checks.
func parseHead(_ raw: String, limits: HTTPHeadLimits = HTTPHeadLimits()) -> HTTPRequestHead? {
    var parser = HTTPRequestHeadParser(limits: limits)
    let bytes = Array(raw.utf8)
    let result = bytes.withUnsafeBytes { parser.parse($0) }
    if case .complete(let head, _) = result { return head }
    Issue.record("expected a complete head, got \(HeadOutcome(result))")
    return nil
}

/// Feeds `bytes` through one parser in a growing buffer, `step` new bytes per call.
///
/// Returns every outcome reported, stopping at the first non-incomplete one
/// (a caller would stop there too: answer, or close).
func parseGrowing(_ bytes: [UInt8], step: Int, limits: HTTPHeadLimits = HTTPHeadLimits()) -> [HeadOutcome] {
    var parser = HTTPRequestHeadParser(limits: limits)
    var buffer: [UInt8] = []
    var outcomes: [HeadOutcome] = []
    var offset = 0
    while offset < bytes.count {
        let end = min(offset + step, bytes.count)
        buffer.append(contentsOf: bytes[offset..<end])
        offset = end
        let outcome = buffer.withUnsafeBytes { HeadOutcome(parser.parse($0)) }
        outcomes.append(outcome)
        if outcome != .incomplete { break }
    }
    return outcomes
}

/// Checks a head case fed whole and fed one byte at a time.
func checkHeadCase(_ c: HeadCase, sourceLocation: SourceLocation = #_sourceLocation) {
    let expected = c.expectedOutcome
    #expect(parseWhole(c.bytes, limits: c.limits) == expected, "fed whole", sourceLocation: sourceLocation)

    let outcomes = parseGrowing(c.bytes, step: 1, limits: c.limits)
    guard let last = outcomes.last else {
        Issue.record("no bytes fed", sourceLocation: sourceLocation)
        return
    }
    #expect(last == expected, "byte at a time: final outcome", sourceLocation: sourceLocation)
    switch expected {
    case .complete:
        // Only the last byte may complete the head.
        #expect(
            outcomes.count == c.bytes.count,
            "byte at a time: completed after \(outcomes.count) of \(c.bytes.count) bytes",
            sourceLocation: sourceLocation)
    case .invalid, .incomplete:
        // May be refused early, must never complete.
        #expect(!outcomes.contains { if case .complete = $0 { true } else { false } }, sourceLocation: sourceLocation)
    }
}

/// One row of a body table.
struct BodyCase: Sendable, CustomTestStringConvertible {
    enum Expected: Sendable, Equatable {
        case body([UInt8])
        case invalid(HTTPParseError)
    }

    let name: String
    let framing: BodyFraming
    let bytes: [UInt8]
    let expected: Expected

    init(_ name: String, _ raw: String, _ expected: Expected, framing: BodyFraming = .chunked) {
        self.init(name, bytes: Array(raw.utf8), expected, framing: framing)
    }

    init(_ name: String, bytes: [UInt8], _ expected: Expected, framing: BodyFraming = .chunked) {
        self.name = name
        self.framing = framing
        self.bytes = bytes
        self.expected = expected
    }

    var testDescription: String { name }
}

/// Shorthand for a decoded body.
func body(_ s: String) -> BodyCase.Expected { .body(Array(s.utf8)) }

/// What feeding a body produced.
struct BodyRun: Equatable, CustomStringConvertible {
    /// The concatenated `.data` bytes.
    var data: [UInt8] = []
    /// Whether `.end` was reported.
    var ended = false
    /// The error, if `.invalid` was reported.
    var error: HTTPParseError?
    /// Bytes of the input the decoder consumed.
    var consumed = 0
    /// Input bytes still unfed when `.end` or `.invalid` came.
    var unfed = 0

    var description: String {
        "data=\(String(decoding: data, as: UTF8.self).debugDescription) ended=\(ended) error=\(error.map { "\($0)" } ?? "nil") consumed=\(consumed) unfed=\(unfed)"
    }
}

/// Feeds `bytes` to a decoder `step` bytes at a time, keeping unconsumed bytes buffered,
/// decoding until the decoder needs more, ends, or refuses.
func decodeGrowing(
    _ bytes: [UInt8], framing: BodyFraming, step: Int,
    maxExtensionBytes: Int = 4096, maxTrailerBytes: Int = 32768
) -> BodyRun {
    var decoder = HTTPBodyDecoder(
        framing: framing, maxExtensionBytes: maxExtensionBytes, maxTrailerBytes: maxTrailerBytes)
    var run = BodyRun()
    var pending: [UInt8] = []
    var offset = 0
    while true {
        // Decode everything buffered so far.
        var guardCount = 0
        while true {
            guardCount += 1
            if guardCount > 10_000 { Issue.record("decoder makes no progress"); return run }
            let (consumed, event) = pending.withUnsafeBytes { decoder.decode($0) }
            #expect(consumed >= 0 && consumed <= pending.count)
            if case .data(let r) = event {
                #expect(!r.isEmpty && r.upperBound <= consumed, "data range \(r) within consumed \(consumed)")
                run.data.append(contentsOf: pending[r])
            }
            pending.removeFirst(consumed)
            run.consumed += consumed
            switch event {
            case .data: continue
            case .needMore:
                #expect(pending.isEmpty, "needMore leaves no bytes behind")
            case .end:
                run.ended = true
                #expect(decoder.isComplete)
                run.unfed = bytes.count - offset
                return run
            case .invalid(let e):
                run.error = e
                run.unfed = bytes.count - offset
                return run
            }
            break
        }
        guard offset < bytes.count else { return run }
        let end = min(offset + step, bytes.count)
        pending.append(contentsOf: bytes[offset..<end])
        offset = end
    }
}
