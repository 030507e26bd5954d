import EventLoop
import Testing

@testable import HTTPServer

/// Manual clock: seconds after an arbitrary non-zero origin, so no test depends on real time.
private func t(_ seconds: Double) -> NanoTime {
    NanoTime(nanoseconds: 1_000_000_000_000 + Int64(seconds * 1_000_000_000))
}

private let headerTimeout = 10.0
private let idleTimeout = 60.0

private typealias Machine = ConnectionStateMachine

private func newMachine(at seconds: Double = 0) -> Machine {
    Machine(now: t(seconds), headerTimeout: headerTimeout, idleTimeout: idleTimeout)
}

/// A machine that has just received a complete head at `seconds`.
private func machineAfterHead(
    at seconds: Double = 1, keepAlive: Bool = true, hasBody: Bool,
    expectsContinue: Bool = false
) -> Machine {
    var m = newMachine()
    _ = m.headBytesReceived(now: t(seconds))
    _ = m.headReceived(now: t(seconds), keepAlive: keepAlive, hasBody: hasBody, expectsContinue: expectsContinue)
    return m
}

/// The states of the table, each reached through events only.
enum StartState: String, CaseIterable, Sendable {
    case accepted, idle, readingHead
    /// Body arriving, response pending.
    case receivingBody
    /// Body held by the handler.
    case pausedBody
    /// Request complete, response pending.
    case awaitingResponse
    /// Request complete, response head queued.
    case streaming
    /// Response complete, the rest of the body being drained.
    case draining
    case closing, closed

    fileprivate var machine: Machine {
        switch self {
        case .accepted: return newMachine()
        case .idle:
            var m = machineAfterHead(hasBody: false)
            _ = m.responseEnded(now: t(2))
            return m
        case .readingHead:
            var m = newMachine()
            _ = m.headBytesReceived(now: t(1))
            return m
        case .receivingBody: return machineAfterHead(hasBody: true)
        case .pausedBody:
            var m = machineAfterHead(hasBody: true)
            _ = m.setBodyFlow(.paused)
            return m
        case .awaitingResponse: return machineAfterHead(hasBody: false)
        case .streaming:
            var m = machineAfterHead(hasBody: false)
            _ = m.responseStarted()
            return m
        case .draining:
            var m = machineAfterHead(hasBody: true)
            _ = m.responseStarted()
            _ = m.responseEnded(now: t(2))
            return m
        case .closing:
            var m = machineAfterHead(hasBody: false)
            _ = m.closeAfterFlush(reason: "upstream_failed_mid_response")
            return m
        case .closed:
            var m = newMachine()
            _ = m.closeNow(reason: nil)
            return m
        }
    }
}

/// Every event the connection delivers (a head only where heads are parsed).
enum Event: String, CaseIterable, Sendable {
    case headBytes, handlerReturned, bodyBytes, pause, resume, bodyEnd, responseStart, retract, responseEnd
    case writerRefused, outputBlocked, outputDrainedPartly, outputDrained, fin, timerEarly, timerLate, shutdown
    case abort, closeNow

    /// Delivers the event; returns the action, described (`responseStart` answers with the
    /// persistence its head announces instead).
    fileprivate func apply(to m: inout Machine) -> String {
        let now = t(5)
        switch self {
        case .headBytes: return describe(m.headBytesReceived(now: now))
        case .handlerReturned: return describe(m.handlerReturned())
        case .bodyBytes: return describe(m.bodyReceived(now: now))
        case .pause: return describe(m.setBodyFlow(.paused))
        case .resume: return describe(m.setBodyFlow(.flowing))
        case .bodyEnd: return describe(m.bodyEnded(now: now))
        case .responseStart: return m.responseStarted() == .close ? "head(close)" : "head(keep)"
        case .retract: return describe(m.responseRetracted())
        case .responseEnd: return describe(m.responseEnded(now: now))
        case .writerRefused: m.writerRefused(); return "-"
        case .outputBlocked: return describe(m.outputBlocked(now: now))
        case .outputDrainedPartly: return describe(m.outputDrained(empty: false))
        case .outputDrained: return describe(m.outputDrained(empty: true))
        case .fin: return describe(m.inputEnded())
        case .timerEarly: return describe(m.timerFired(now: now))
        case .timerLate: return describe(m.timerFired(now: t(100_000)))
        case .shutdown: return describe(m.shutdown())
        case .abort: return describe(m.closeAfterFlush(reason: "aborted"))
        case .closeNow: return describe(m.closeNow(reason: "read_error"))
        }
    }
}

/// A short, stable name of a state for the table.
private func describe(_ state: Machine.State) -> String {
    switch state {
    case .accepted: return "accepted"
    case .idle: return "idle"
    case .readingHead(_, let persistence): return persistence == .close ? "readingHead(close)" : "readingHead"
    case .exchange(let e):
        let request: String
        switch e.request {
        case .body(.flowing, _, _): request = "body"
        case .body(.paused, _, _): request = "paused"
        case .complete: request = "complete"
        }
        let response: String
        switch e.response {
        case .pending: response = "pending"
        case .streaming(.ready): response = "streaming"
        case .streaming(.waiting): response = "waiting"
        case .complete: response = "complete"
        }
        return "exchange(\(request),\(response)\(e.persistence == .close ? ",close" : ""))"
    case .closing(let reason): return "closing(\(reason ?? "-"))"
    case .closed: return "closed"
    case .handedOver: return "handedOver"
    }
}

private func describe(_ action: Machine.Action) -> String {
    switch action {
    case .none: return "-"
    case .armTimer: return "timer"
    case .deliverBody: return "deliver"
    case .deliverBodyEnd: return "bodyEnd"
    case .resumeBody: return "resume"
    case .dropResponse: return "drop"
    case .readNextRequest: return "readNext"
    case .sendContinue: return "continue"
    case .notifyWritable: return "writable"
    case .flushAndClose: return "flushClose"
    case .close(let reason): return "close(\(reason ?? "-"))"
    case .handOver: return "handOver"
    }
}

/// Expected `state / action` after each event, per start state, in `Event.allCases` order.
private let table: [StartState: [String]] = [
    .accepted: [
        "readingHead / -", "accepted / -", "accepted / -", "accepted / -", "accepted / -", "accepted / -",
        "accepted / head(close)", "accepted / -", "accepted / -", "accepted / -", "accepted / timer", "accepted / -",
        "accepted / -", "closed / close(client_closed)", "accepted / -", "closed / close(timeout)", "closed / close(-)",
        "closing(aborted) / flushClose", "closed / close(read_error)",
    ],
    .idle: [
        "readingHead / timer", "idle / -", "idle / -", "idle / -", "idle / -", "idle / -", "idle / head(close)",
        "idle / -", "idle / -", "idle / -", "idle / timer", "idle / -", "idle / -", "closed / close(client_closed)",
        "idle / -", "closed / close(timeout)", "closing(-) / flushClose", "closing(aborted) / flushClose",
        "closed / close(read_error)",
    ],
    .readingHead: [
        "readingHead / -", "readingHead / -", "readingHead / -", "readingHead / -", "readingHead / -",
        "readingHead / -", "readingHead / head(close)", "readingHead / -", "readingHead / -", "readingHead / -",
        "readingHead / timer", "readingHead / -", "readingHead / -", "closed / close(client_closed)", "readingHead / -",
        "closed / close(timeout)", "readingHead(close) / -", "closing(aborted) / flushClose",
        "closed / close(read_error)",
    ],
    .receivingBody: [
        "exchange(body,pending) / -", "exchange(body,pending) / -", "exchange(body,pending) / deliver",
        "exchange(paused,pending) / -", "exchange(body,pending) / -", "exchange(complete,pending) / bodyEnd",
        "exchange(body,streaming) / head(keep)", "exchange(body,pending) / -", "exchange(body,complete) / -",
        "exchange(body,pending) / -", "exchange(body,pending) / timer", "exchange(body,pending) / -",
        "exchange(body,pending) / -", "closed / close(client_closed_mid_request)", "exchange(body,pending) / -",
        "closed / close(timeout)", "exchange(body,pending,close) / -", "closing(aborted) / flushClose",
        "closed / close(read_error)",
    ],
    .pausedBody: [
        "exchange(paused,pending) / -", "exchange(paused,pending) / -", "exchange(paused,pending) / deliver",
        "exchange(paused,pending) / -", "exchange(body,pending) / resume", "exchange(complete,pending) / bodyEnd",
        "exchange(paused,streaming) / head(keep)", "exchange(paused,pending) / -", "exchange(paused,complete) / -",
        "exchange(paused,pending) / -", "exchange(paused,pending) / timer", "exchange(paused,pending) / -",
        "exchange(paused,pending) / -", "closed / close(client_closed_mid_request)", "exchange(paused,pending) / -",
        "closed / close(timeout)", "exchange(paused,pending,close) / -", "closing(aborted) / flushClose",
        "closed / close(read_error)",
    ],
    .awaitingResponse: [
        "exchange(complete,pending) / -", "exchange(complete,pending) / -", "exchange(complete,pending) / -",
        "exchange(complete,pending) / -", "exchange(complete,pending) / -", "exchange(complete,pending) / -",
        "exchange(complete,streaming) / head(keep)", "exchange(complete,pending) / -", "idle / readNext",
        "exchange(complete,pending) / -", "exchange(complete,pending) / timer", "exchange(complete,pending) / -",
        "exchange(complete,pending) / -", "closed / close(client_closed)", "exchange(complete,pending) / -",
        "exchange(complete,pending) / -", "exchange(complete,pending,close) / -", "closing(aborted) / flushClose",
        "closed / close(read_error)",
    ],
    .streaming: [
        "exchange(complete,streaming) / -", "exchange(complete,streaming) / -", "exchange(complete,streaming) / -",
        "exchange(complete,streaming) / -", "exchange(complete,streaming) / -", "exchange(complete,streaming) / -",
        "exchange(complete,streaming) / head(keep)", "exchange(complete,pending) / drop", "idle / readNext",
        "exchange(complete,waiting) / -", "exchange(complete,streaming) / timer", "exchange(complete,streaming) / -",
        "exchange(complete,streaming) / -", "closed / close(client_closed)", "exchange(complete,streaming) / -",
        "exchange(complete,streaming) / -", "exchange(complete,streaming,close) / -", "closing(aborted) / flushClose",
        "closed / close(read_error)",
    ],
    .draining: [
        "exchange(body,complete) / -", "exchange(body,complete) / -", "exchange(body,complete) / -",
        "exchange(paused,complete) / -", "exchange(body,complete) / -", "idle / readNext",
        "exchange(body,complete) / head(keep)", "exchange(body,complete) / -", "exchange(body,complete) / -",
        "exchange(body,complete) / -", "exchange(body,complete) / timer", "exchange(body,complete) / -",
        "exchange(body,complete) / -", "closed / close(client_closed_mid_request)", "exchange(body,complete) / -",
        "closed / close(timeout)", "exchange(body,complete,close) / -", "closing(aborted) / flushClose",
        "closed / close(read_error)",
    ],
    .closing: [
        "closing(upstream_failed_mid_response) / -", "closing(upstream_failed_mid_response) / -",
        "closing(upstream_failed_mid_response) / -", "closing(upstream_failed_mid_response) / -",
        "closing(upstream_failed_mid_response) / -", "closing(upstream_failed_mid_response) / -",
        "closing(upstream_failed_mid_response) / head(close)", "closing(upstream_failed_mid_response) / -",
        "closing(upstream_failed_mid_response) / -", "closing(upstream_failed_mid_response) / -",
        "closing(upstream_failed_mid_response) / timer", "closing(upstream_failed_mid_response) / -",
        "closed / close(upstream_failed_mid_response)", "closed / close(upstream_failed_mid_response)",
        "closing(upstream_failed_mid_response) / -", "closing(upstream_failed_mid_response) / -",
        "closing(upstream_failed_mid_response) / -", "closing(upstream_failed_mid_response) / flushClose",
        "closed / close(read_error)",
    ],
    .closed: [
        "closed / -", "closed / -", "closed / -", "closed / -", "closed / -", "closed / -", "closed / head(close)",
        "closed / -", "closed / -", "closed / -", "closed / -", "closed / -", "closed / -", "closed / -", "closed / -",
        "closed / -", "closed / -", "closed / -", "closed / -",
    ],
]

@Suite("ConnectionStateMachine")
struct ConnectionStateMachineTests {
    @Test("every state and event pair gives the tabled state and action", arguments: StartState.allCases)
    func stateEventTable(start: StartState) throws {
        let expected = try #require(table[start])
        #expect(expected.count == Event.allCases.count)
        for (event, want) in zip(Event.allCases, expected) {
            var m = start.machine
            let action = event.apply(to: &m)
            #expect("\(describe(m.state)) / \(action)" == want, "\(start.rawValue) + \(event.rawValue)")
        }
    }

    @Test("what is parsed next and whether the socket is read, per state", arguments: StartState.allCases)
    func readingTable(start: StartState) throws {
        // A head only between exchanges; a paused body only once the response ended (drained);
        // while the response is pending the socket is read only while the buffer has room.
        let expected: [StartState: (Machine.Reading, Machine.ReadInterest)] = [
            .accepted: (.head, .read), .idle: (.head, .read), .readingHead: (.head, .read),
            .receivingBody: (.body, .read), .pausedBody: (.nothing, .none),
            .awaitingResponse: (.nothing, .readUnlessFull), .streaming: (.nothing, .readUnlessFull),
            .draining: (.body, .read), .closing: (.nothing, .none), .closed: (.closed, .none),
        ]
        let (reading, interest) = try #require(expected[start])
        var m = start.machine
        #expect(m.reading == reading)
        #expect(m.readInterest == interest)
        // A stalled reader stops all reading, whatever the state.
        _ = m.outputBlocked(now: t(5))
        #expect(m.readInterest == .none)
        #expect(m.reading == reading)
    }

    @Test(
        "an accepted upgrade hands the socket over only from a complete request with no response queued",
        arguments: StartState.allCases)
    func upgradedTable(start: StartState) {
        var m = start.machine
        let action = m.upgraded()
        if start == .awaitingResponse {
            #expect(action == .handOver)
            #expect(m.state == .handedOver)
            #expect(m.isGone)
            // The connection owns the socket no more: no event reads, writes, times or closes it.
            #expect(m.deadline == nil)
            #expect(m.reading == .closed)
            #expect(m.readInterest == .none)
            for event in Event.allCases where event != .responseStart {
                var copy = m
                _ = event.apply(to: &copy)
                #expect(copy.state == .handedOver, "handedOver + \(event.rawValue)")
            }
            #expect(m.closeNow(reason: "x") == .none)
            #expect(m.inputEnded() == .none)
        } else {
            #expect(action == .none, "\(start.rawValue)")
            #expect(m.state == start.machine.state, "\(start.rawValue)")
        }
    }

    @Test(
        "a parsed head: the exchange's request side, its persistence, and a timer only for a body",
        arguments: [StartState.accepted, .idle, .readingHead])
    func headReceivedTable(start: StartState) {
        // (keepAlive, hasBody, expectsContinue) → state / action, and the persistence the response announces.
        let cases: [((Bool, Bool, Bool), String)] = [
            ((true, false, false), "exchange(complete,pending) / - / keep"),
            ((false, false, false), "exchange(complete,pending,close) / - / close"),
            ((true, true, false), "exchange(body,pending) / timer / keep"),
            ((true, true, true), "exchange(body,pending) / timer / keep"),
            ((false, true, false), "exchange(body,pending,close) / timer / close"),
        ]
        for ((keepAlive, hasBody, expectsContinue), want) in cases {
            var m = start.machine
            let action = m.headReceived(
                now: t(5), keepAlive: keepAlive, hasBody: hasBody, expectsContinue: expectsContinue)
            let state = describe(m.state)
            let persistence = m.responseStarted() == .close ? "close" : "keep"
            #expect(
                "\(state) / \(describe(action)) / \(persistence)" == want,
                "\(start.rawValue) \(keepAlive) \(hasBody) \(expectsContinue)")
            // Only a client told to wait for the invitation is sent `100 Continue`.
            var invited = start.machine
            _ = invited.headReceived(
                now: t(5), keepAlive: keepAlive, hasBody: hasBody, expectsContinue: expectsContinue)
            #expect(invited.handlerReturned() == (expectsContinue ? .sendContinue : .none))
        }
    }

    @Test("a new connection must send its first head within the header timeout of accept")
    func newConnectionDeadline() {
        var m = newMachine(at: 0)
        #expect(m.deadline == t(headerTimeout))
        #expect(m.timerFired(now: t(9.999)) == .none)
        #expect(m.timerFired(now: t(10)) == .close(reason: "timeout"))
        #expect(m.reading == .closed)
    }

    @Test("slow-loris: trickling head bytes never extend the header deadline")
    func slowLoris() {
        var m = newMachine(at: 0)
        for second in [1.0, 3, 5, 7, 9, 9.9] {
            #expect(m.headBytesReceived(now: t(second)) == .none)
            #expect(m.deadline == t(headerTimeout))
        }
        #expect(m.timerFired(now: t(9.99)) == .none)
        #expect(m.timerFired(now: t(10.5)) == .close(reason: "timeout"))
    }

    @Test("keep-alive: idle timeout between requests, header timeout from the next request's first byte")
    func keepAliveCycle() {
        var m = machineAfterHead(at: 1, hasBody: false)
        #expect(m.deadline == nil)
        // The handler may take as long as it likes: no deadline applies.
        #expect(m.timerFired(now: t(10_000)) == .none)
        #expect(m.responseStarted() == .keepAlive)
        #expect(m.responseEnded(now: t(2)) == .readNextRequest)
        #expect(m.deadline == t(2 + idleTimeout))
        // The header deadline is earlier than the idle one: the timer is re-armed.
        #expect(m.headBytesReceived(now: t(30)) == .armTimer)
        #expect(m.deadline == t(30 + headerTimeout))
        #expect(m.headBytesReceived(now: t(35)) == .none)
        #expect(m.deadline == t(30 + headerTimeout))
        #expect(m.headReceived(now: t(36), keepAlive: true, hasBody: false) == .none)
        #expect(m.deadline == nil)
        #expect(m.responseEnded(now: t(37)) == .readNextRequest)
        #expect(m.deadline == t(37 + idleTimeout))
    }

    @Test("long upload: body bytes that keep coming never time out, however long past the header and idle timeouts")
    func longUploadNeverTimesOutWhileFlowing() {
        var m = machineAfterHead(at: 1, hasBody: true)
        var now = 1.0
        while now < 1_000 {
            now += idleTimeout - 1
            #expect(m.timerFired(now: t(now)) == .none)
            #expect(m.bodyReceived(now: t(now)) == .deliverBody)
            #expect(m.deadline == t(now + idleTimeout))
        }
        #expect(m.bodyEnded(now: t(now)) == .deliverBodyEnd)
        #expect(m.deadline == nil)
    }

    @Test("long upload: a body that stalls for the idle timeout closes, whatever the header timeout")
    func stalledUploadTimesOut() {
        var m = machineAfterHead(at: 1, hasBody: true)
        _ = m.bodyReceived(now: t(500))
        #expect(m.timerFired(now: t(500 + idleTimeout - 0.001)) == .none)
        #expect(m.timerFired(now: t(500 + idleTimeout)) == .close(reason: "timeout"))
    }

    @Test("client FIN before the response head: close at once, logged as the client leaving")
    func finBeforeResponseHead() {
        var m = machineAfterHead(at: 1, hasBody: false)
        #expect(m.inputEnded() == .close(reason: "client_closed"))
        #expect(m.reading == .closed)
        var uploading = machineAfterHead(at: 1, hasBody: true)
        #expect(uploading.inputEnded() == .close(reason: "client_closed_mid_request"))
    }

    @Test("upstream closing after the head: an unsent response is retracted and answered again")
    func retractThenAnswer() {
        var m = machineAfterHead(at: 1, hasBody: false)
        #expect(m.responseStarted() == .keepAlive)
        #expect(m.responseRetracted() == .dropResponse)
        #expect(m.state == .exchange(.init(request: .complete, response: .pending, persistence: .keepAlive)))
        #expect(m.responseRetracted() == .none)
        #expect(m.responseStarted() == .keepAlive)
        #expect(m.responseEnded(now: t(3)) == .readNextRequest)
    }

    @Test(
        "upstream closing after part of the body: what is queued is flushed, then the connection closes with the reason"
    )
    func abortFlushesThenCloses() {
        var m = machineAfterHead(at: 1, hasBody: false)
        _ = m.responseStarted()
        #expect(m.outputBlocked(now: t(2)) == .armTimer)
        #expect(m.closeAfterFlush(reason: "upstream_failed_mid_response") == .flushAndClose)
        // Once closing, a started response cannot be taken back.
        #expect(m.responseRetracted() == .none)
        #expect(m.readInterest == .none)
        // A stalled reader bounds the flush.
        #expect(m.deadline == t(2 + idleTimeout))
        #expect(m.outputDrained(empty: false) == .none)
        #expect(m.outputDrained(empty: true) == .close(reason: "upstream_failed_mid_response"))
    }

    @Test("an early response drains the rest of the body, then reads the next request")
    func earlyResponseDrainsBody() {
        var m = machineAfterHead(at: 1, hasBody: true)
        #expect(m.setBodyFlow(.paused) == .none)
        #expect(m.reading == .nothing)
        _ = m.responseStarted()
        #expect(m.responseEnded(now: t(2)) == .none)
        // Drained even though the handler paused it; nothing is delivered.
        #expect(m.reading == .body)
        #expect(m.bodyReceived(now: t(3)) == .none)
        #expect(m.bodyEnded(now: t(4)) == .readNextRequest)
        #expect(m.deadline == t(4 + idleTimeout))
    }

    @Test(
        "100-continue: sent after the handler returns unless it already answered; an answered client that never sent its body is closed"
    )
    func expectContinue() {
        var invited = machineAfterHead(at: 1, hasBody: true, expectsContinue: true)
        #expect(invited.handlerReturned() == .sendContinue)
        #expect(invited.handlerReturned() == .none)
        _ = invited.responseStarted()
        #expect(invited.responseEnded(now: t(2)) == .none)

        var answered = machineAfterHead(at: 1, hasBody: true, expectsContinue: true)
        _ = answered.responseStarted()
        #expect(answered.handlerReturned() == .none)
        #expect(answered.responseEnded(now: t(2)) == .flushAndClose)
        #expect(answered.state == .closing(reason: nil))
    }

    @Test("a request without keep-alive, or a close-delimited response, closes after the response")
    func closeAfterResponse() {
        var m = machineAfterHead(at: 1, keepAlive: false, hasBody: false)
        #expect(m.responseStarted() == .close)
        #expect(m.responseEnded(now: t(2)) == .flushAndClose)

        var delimited = machineAfterHead(at: 1, hasBody: false)
        #expect(delimited.responseStarted(closeDelimited: true) == .close)
        #expect(delimited.responseEnded(now: t(2)) == .flushAndClose)
    }

    @Test("shutdown while a head is arriving: the request is answered with close")
    func shutdownReadingHead() {
        var m = newMachine()
        _ = m.headBytesReceived(now: t(1))
        #expect(m.shutdown() == .none)
        #expect(m.headReceived(now: t(2), keepAlive: true, hasBody: true) == .armTimer)
        #expect(m.bodyEnded(now: t(3)) == .deliverBodyEnd)
        #expect(m.responseStarted() == .close)
        #expect(m.responseEnded(now: t(4)) == .flushAndClose)
    }

    @Test("a stalled reader times out; drained output clears the deadline while awaiting the response")
    func outputBlocked() {
        var m = machineAfterHead(at: 1, hasBody: false)
        #expect(m.outputBlocked(now: t(5)) == .armTimer)
        // Blocking again does not move the deadline: the reader stalls from the first block.
        #expect(m.outputBlocked(now: t(6)) == .none)
        #expect(m.deadline == t(5 + idleTimeout))
        #expect(m.readInterest == .none)
        #expect(m.outputDrained(empty: true) == .none)
        #expect(m.deadline == nil)
        _ = m.outputBlocked(now: t(7))
        #expect(m.timerFired(now: t(7 + idleTimeout - 0.5)) == .none)
        #expect(m.timerFired(now: t(7 + idleTimeout)) == .close(reason: "timeout"))
    }

    @Test("a writer refused while streaming is told once when output drains")
    func writerBackpressure() {
        var m = machineAfterHead(at: 1, hasBody: false)
        _ = m.responseStarted()
        m.writerRefused()
        _ = m.outputBlocked(now: t(2))
        #expect(m.outputDrained(empty: false) == .notifyWritable)
        #expect(m.outputDrained(empty: true) == .none)
    }

    @Test("a timer firing before an extended deadline does nothing")
    func earlyTimer() {
        var m = newMachine(at: 0)
        _ = m.headReceived(now: t(1), keepAlive: true, hasBody: false)
        #expect(m.responseEnded(now: t(2)) == .readNextRequest)
        #expect(m.timerFired(now: t(headerTimeout)) == .none)
        #expect(m.deadline == t(2 + idleTimeout))
    }
}
