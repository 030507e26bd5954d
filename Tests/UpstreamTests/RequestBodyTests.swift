import Testing

@testable import Upstream

/// Bytes for `append`.
private func send(_ body: RequestBody, _ count: Int) {
    let bytes = [UInt8](repeating: 7, count: count)
    bytes.withUnsafeBytes { body.append($0) }
}

private let limit = 10

/// The states of the table, each reached through events from a new body.
enum RequestBodyStart: String, CaseIterable, Sendable {
    case fresh, receivingWhole, receivingStreamed, endedWhole, endedStreamed

    var body: RequestBody {
        let body = RequestBody(replayLimit: limit)
        switch self {
        case .fresh: break
        case .receivingWhole: send(body, limit)
        case .receivingStreamed: send(body, limit + 1)
        case .endedWhole:
            send(body, 4)
            body.finish()
        case .endedStreamed:
            send(body, limit + 1)
            body.finish()
        }
        return body
    }
}

/// What the client connection does to a body.
enum RequestBodyEvent: String, CaseIterable, Sendable {
    /// One byte arrives.
    case byte
    /// Enough bytes arrive to pass the replay limit however many came before.
    case pastLimit
    /// The client ends the body.
    case finish

    func apply(to body: RequestBody) {
        switch self {
        case .byte: send(body, 1)
        case .pastLimit: send(body, limit + 1)
        case .finish: body.finish()
        }
    }
}

private func describe(_ state: RequestBody.State) -> String {
    switch state {
    case .receiving(.whole): "receiving(whole)"
    case .receiving(.streamed): "receiving(streamed)"
    case .ended(.whole): "ended(whole)"
    case .ended(.streamed): "ended(streamed)"
    }
}

/// Expected `state replayable` after each event, per start state, in `RequestBodyEvent.allCases` order.
private let table: [RequestBodyStart: [String]] = [
    // Exactly the limit is still kept whole; one byte more is not.
    .fresh: ["receiving(whole) -", "receiving(streamed) -", "ended(whole) replay"],
    .receivingWhole: ["receiving(streamed) -", "receiving(streamed) -", "ended(whole) replay"],
    .receivingStreamed: ["receiving(streamed) -", "receiving(streamed) -", "ended(streamed) -"],
    .endedWhole: ["ended(whole) replay", "ended(streamed) -", "ended(whole) replay"],
    .endedStreamed: ["ended(streamed) -", "ended(streamed) -", "ended(streamed) -"],
]

@Suite("RequestBody: lifecycle and retention")
struct RequestBodyTests {
    @Test(
        "every start state and event gives the tabled state, and a replay only of an ended whole body",
        arguments: RequestBodyStart.allCases)
    func stateEventTable(start: RequestBodyStart) throws {
        let expected = try #require(table[start])
        #expect(expected.count == RequestBodyEvent.allCases.count)
        for (event, want) in zip(RequestBodyEvent.allCases, expected) {
            let body = start.body
            event.apply(to: body)
            let replay = body.replay()
            #expect(
                "\(describe(body.state)) \(replay == nil ? "-" : "replay")" == want,
                "\(start.rawValue) + \(event.rawValue)")
            #expect(body.isReplayable == (replay != nil))
            #expect(body.ended == (body.state == .ended(body.state.retention)))
        }
    }

    @Test("a replay has the same bytes, ended and whole; a streamed body drops what curl read")
    func replayAndStreaming() {
        let body = RequestBody(replayLimit: limit)
        send(body, 6)
        body.finish()
        let copy = body.replay()
        #expect(copy?.state == .ended(.whole) && copy?.totalBytes == 6 && copy?.buffered == 6)
        var buffer = [UInt8](repeating: 0, count: 100)
        let read = buffer.withUnsafeMutableBytes { copy?.read(into: $0) }
        guard case .bytes(6) = read else { Issue.record("read \(String(describing: read))"); return }
        // Read bytes stay kept: the original can be replayed again.
        #expect(body.replay()?.buffered == 6)

        let streamed = RequestBody(replayLimit: limit)
        send(streamed, limit + 5)
        _ = buffer.withUnsafeMutableBytes { streamed.read(into: $0) }
        #expect(streamed.buffered == 0)
        guard case .wait = buffer.withUnsafeMutableBytes({ streamed.read(into: $0) }) else {
            Issue.record("a body not ended waits"); return
        }
        streamed.finish()
        guard case .end = buffer.withUnsafeMutableBytes({ streamed.read(into: $0) }) else {
            Issue.record("an ended body ends"); return
        }
        #expect(streamed.replay() == nil)
    }
}
