import Testing
@testable import HTTPServer
import EventLoop

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
private func machineAfterHead(at seconds: Double = 1, keepAlive: Bool = true, hasBody: Bool,
                              expectsContinue: Bool = false) -> Machine {
    var m = newMachine()
    m.headBytesReceived(now: t(seconds))
    m.headReceived(now: t(seconds), keepAlive: keepAlive, hasBody: hasBody, expectsContinue: expectsContinue)
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
            m.headBytesReceived(now: t(1))
            return m
        case .receivingBody: return machineAfterHead(hasBody: true)
        case .pausedBody:
            var m = machineAfterHead(hasBody: true)
            _ = m.setBodyFlow(.paused)
            return m
        case .awaitingResponse: return machineAfterHead(hasBody: false)
        case .streaming:
            var m = machineAfterHead(hasBody: false)
            m.responseStarted()
            return m
        case .draining:
            var m = machineAfterHead(hasBody: true)
            m.responseStarted()
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

    fileprivate func apply(to m: inout Machine) -> Machine.Action {
        let now = t(5)
        switch self {
        case .headBytes: m.headBytesReceived(now: now); return .none
        case .handlerReturned: return m.handlerReturned()
        case .bodyBytes: m.bodyReceived(now: now); return .none
        case .pause: _ = m.setBodyFlow(.paused); return .none
        case .resume: _ = m.setBodyFlow(.flowing); return .none
        case .bodyEnd: return m.bodyEnded(now: now)
        case .responseStart: m.responseStarted(); return .none
        case .retract: m.responseRetracted(); return .none
        case .responseEnd: return m.responseEnded(now: now)
        case .writerRefused: m.writerRefused(); return .none
        case .outputBlocked: m.outputBlocked(now: now); return .none
        case .outputDrainedPartly: return m.outputDrained(empty: false)
        case .outputDrained: return m.outputDrained(empty: true)
        case .fin: return m.inputEnded()
        case .timerEarly: return m.timerFired(now: now)
        case .timerLate: return m.timerFired(now: t(100_000))
        case .shutdown: return m.shutdown()
        case .abort: return m.closeAfterFlush(reason: "aborted")
        case .closeNow: return m.closeNow(reason: "read_error")
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
    }
}

private func describe(_ action: Machine.Action) -> String {
    switch action {
    case .none: return "-"
    case .readNextRequest: return "readNext"
    case .sendContinue: return "continue"
    case .notifyWritable: return "writable"
    case .flushAndClose: return "flushClose"
    case .close(let reason): return "close(\(reason ?? "-"))"
    }
}

/// Expected `state / action` after each event, per start state, in `Event.allCases` order.
private let table: [StartState: [String]] = [
    .accepted: [
        "readingHead / -", "accepted / -", "accepted / -", "accepted / -", "accepted / -", "accepted / -",
        "accepted / -", "accepted / -", "accepted / -", "accepted / -", "accepted / -", "accepted / -",
        "accepted / -", "closed / close(client_closed)", "accepted / -", "closed / close(timeout)",
        "closed / close(-)", "closing(aborted) / flushClose", "closed / close(read_error)",
    ],
    .idle: [
        "readingHead / -", "idle / -", "idle / -", "idle / -", "idle / -", "idle / -",
        "idle / -", "idle / -", "idle / -", "idle / -", "idle / -", "idle / -",
        "idle / -", "closed / close(client_closed)", "idle / -", "closed / close(timeout)",
        "closing(-) / flushClose", "closing(aborted) / flushClose", "closed / close(read_error)",
    ],
    .readingHead: [
        "readingHead / -", "readingHead / -", "readingHead / -", "readingHead / -", "readingHead / -", "readingHead / -",
        "readingHead / -", "readingHead / -", "readingHead / -", "readingHead / -", "readingHead / -", "readingHead / -",
        "readingHead / -", "closed / close(client_closed)", "readingHead / -", "closed / close(timeout)",
        "readingHead(close) / -", "closing(aborted) / flushClose", "closed / close(read_error)",
    ],
    .receivingBody: [
        "exchange(body,pending) / -", "exchange(body,pending) / -", "exchange(body,pending) / -",
        "exchange(paused,pending) / -", "exchange(body,pending) / -", "exchange(complete,pending) / -",
        "exchange(body,streaming) / -", "exchange(body,pending) / -", "exchange(body,complete) / -",
        "exchange(body,pending) / -", "exchange(body,pending) / -", "exchange(body,pending) / -",
        "exchange(body,pending) / -", "closed / close(client_closed_mid_request)", "exchange(body,pending) / -",
        "closed / close(timeout)", "exchange(body,pending,close) / -", "closing(aborted) / flushClose",
        "closed / close(read_error)",
    ],
    .pausedBody: [
        "exchange(paused,pending) / -", "exchange(paused,pending) / -", "exchange(paused,pending) / -",
        "exchange(paused,pending) / -", "exchange(body,pending) / -", "exchange(complete,pending) / -",
        "exchange(paused,streaming) / -", "exchange(paused,pending) / -", "exchange(paused,complete) / -",
        "exchange(paused,pending) / -", "exchange(paused,pending) / -", "exchange(paused,pending) / -",
        "exchange(paused,pending) / -", "closed / close(client_closed_mid_request)", "exchange(paused,pending) / -",
        "closed / close(timeout)", "exchange(paused,pending,close) / -", "closing(aborted) / flushClose",
        "closed / close(read_error)",
    ],
    .awaitingResponse: [
        "exchange(complete,pending) / -", "exchange(complete,pending) / -", "exchange(complete,pending) / -",
        "exchange(complete,pending) / -", "exchange(complete,pending) / -", "exchange(complete,pending) / -",
        "exchange(complete,streaming) / -", "exchange(complete,pending) / -", "idle / readNext",
        "exchange(complete,pending) / -", "exchange(complete,pending) / -", "exchange(complete,pending) / -",
        "exchange(complete,pending) / -", "closed / close(client_closed)", "exchange(complete,pending) / -",
        "exchange(complete,pending) / -", "exchange(complete,pending,close) / -", "closing(aborted) / flushClose",
        "closed / close(read_error)",
    ],
    .streaming: [
        "exchange(complete,streaming) / -", "exchange(complete,streaming) / -", "exchange(complete,streaming) / -",
        "exchange(complete,streaming) / -", "exchange(complete,streaming) / -", "exchange(complete,streaming) / -",
        "exchange(complete,streaming) / -", "exchange(complete,pending) / -", "idle / readNext",
        "exchange(complete,waiting) / -", "exchange(complete,streaming) / -", "exchange(complete,streaming) / -",
        "exchange(complete,streaming) / -", "closed / close(client_closed)", "exchange(complete,streaming) / -",
        "exchange(complete,streaming) / -", "exchange(complete,streaming,close) / -", "closing(aborted) / flushClose",
        "closed / close(read_error)",
    ],
    .draining: [
        "exchange(body,complete) / -", "exchange(body,complete) / -", "exchange(body,complete) / -",
        "exchange(paused,complete) / -", "exchange(body,complete) / -", "idle / readNext",
        "exchange(body,complete) / -", "exchange(body,complete) / -", "exchange(body,complete) / -",
        "exchange(body,complete) / -", "exchange(body,complete) / -", "exchange(body,complete) / -",
        "exchange(body,complete) / -", "closed / close(client_closed_mid_request)", "exchange(body,complete) / -",
        "closed / close(timeout)", "exchange(body,complete,close) / -", "closing(aborted) / flushClose",
        "closed / close(read_error)",
    ],
    .closing: [
        "closing(upstream_failed_mid_response) / -", "closing(upstream_failed_mid_response) / -",
        "closing(upstream_failed_mid_response) / -", "closing(upstream_failed_mid_response) / -",
        "closing(upstream_failed_mid_response) / -", "closing(upstream_failed_mid_response) / -",
        "closing(upstream_failed_mid_response) / -", "closing(upstream_failed_mid_response) / -",
        "closing(upstream_failed_mid_response) / -", "closing(upstream_failed_mid_response) / -",
        "closing(upstream_failed_mid_response) / -", "closing(upstream_failed_mid_response) / -",
        "closed / close(upstream_failed_mid_response)", "closed / close(upstream_failed_mid_response)",
        "closing(upstream_failed_mid_response) / -", "closing(upstream_failed_mid_response) / -",
        "closing(upstream_failed_mid_response) / -", "closing(upstream_failed_mid_response) / flushClose",
        "closed / close(read_error)",
    ],
    .closed: Array(repeating: "closed / -", count: Event.allCases.count),
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
            #expect("\(describe(m.state)) / \(describe(action))" == want, "\(start.rawValue) + \(event.rawValue)")
        }
    }

    @Test("a head is parsed only in accepted, idle and readingHead")
    func headsOnlyBetweenExchanges() {
        for start in StartState.allCases {
            let m = start.machine
            #expect(m.expectsHead == [.accepted, .idle, .readingHead].contains(start), "\(start.rawValue)")
        }
    }

    @Test("a new connection must send its first head within the header timeout of accept")
    func newConnectionDeadline() {
        var m = newMachine(at: 0)
        #expect(m.deadline == t(headerTimeout))
        #expect(m.timerFired(now: t(9.999)) == .none)
        #expect(m.timerFired(now: t(10)) == .close(reason: "timeout"))
        #expect(m.isClosed)
    }

    @Test("slow-loris: trickling head bytes never extend the header deadline")
    func slowLoris() {
        var m = newMachine(at: 0)
        for second in [1.0, 3, 5, 7, 9, 9.9] {
            m.headBytesReceived(now: t(second))
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
        #expect(m.closesAfterResponse == false)
        #expect(m.responseEnded(now: t(2)) == .readNextRequest)
        #expect(m.deadline == t(2 + idleTimeout))
        m.headBytesReceived(now: t(30))
        #expect(m.deadline == t(30 + headerTimeout))
        m.headBytesReceived(now: t(35))
        #expect(m.deadline == t(30 + headerTimeout))
        m.headReceived(now: t(36), keepAlive: true, hasBody: false)
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
            m.bodyReceived(now: t(now))
            #expect(m.deadline == t(now + idleTimeout))
        }
        #expect(m.bodyEnded(now: t(now)) == .none)
        #expect(m.deadline == nil)
    }

    @Test("long upload: a body that stalls for the idle timeout closes, whatever the header timeout")
    func stalledUploadTimesOut() {
        var m = machineAfterHead(at: 1, hasBody: true)
        m.bodyReceived(now: t(500))
        #expect(m.timerFired(now: t(500 + idleTimeout - 0.001)) == .none)
        #expect(m.timerFired(now: t(500 + idleTimeout)) == .close(reason: "timeout"))
    }

    @Test("client FIN before the response head: close at once, logged as the client leaving")
    func finBeforeResponseHead() {
        var m = machineAfterHead(at: 1, hasBody: false)
        #expect(m.inputEnded() == .close(reason: "client_closed"))
        #expect(m.isClosed)
        var uploading = machineAfterHead(at: 1, hasBody: true)
        #expect(uploading.inputEnded() == .close(reason: "client_closed_mid_request"))
    }

    @Test("upstream closing after the head: an unsent response is retracted and answered again")
    func retractThenAnswer() {
        var m = machineAfterHead(at: 1, hasBody: false)
        m.responseStarted()
        m.responseRetracted()
        #expect(m.state == .exchange(.init(request: .complete, response: .pending, persistence: .keepAlive)))
        m.responseStarted()
        #expect(m.responseEnded(now: t(3)) == .readNextRequest)
    }

    @Test("upstream closing after part of the body: what is queued is flushed, then the connection closes with the reason")
    func abortFlushesThenCloses() {
        var m = machineAfterHead(at: 1, hasBody: false)
        m.responseStarted()
        m.outputBlocked(now: t(2))
        #expect(m.closeAfterFlush(reason: "upstream_failed_mid_response") == .flushAndClose)
        #expect(m.wantsRead(inputFull: false) == false)
        // A stalled reader bounds the flush.
        #expect(m.deadline == t(2 + idleTimeout))
        #expect(m.outputDrained(empty: false) == .none)
        #expect(m.outputDrained(empty: true) == .close(reason: "upstream_failed_mid_response"))
    }

    @Test("an early response drains the rest of the body, then reads the next request")
    func earlyResponseDrainsBody() {
        var m = machineAfterHead(at: 1, hasBody: true)
        _ = m.setBodyFlow(.paused)
        #expect(m.readsBody == false)
        m.responseStarted()
        #expect(m.responseEnded(now: t(2)) == .none)
        // Drained even though the handler paused it; nothing is delivered.
        #expect(m.readsBody)
        #expect(m.deliversBody == false)
        #expect(m.bodyEnded(now: t(4)) == .readNextRequest)
        #expect(m.deadline == t(4 + idleTimeout))
    }

    @Test("100-continue: sent after the handler returns unless it already answered; an answered client that never sent its body is closed")
    func expectContinue() {
        var invited = machineAfterHead(at: 1, hasBody: true, expectsContinue: true)
        #expect(invited.handlerReturned() == .sendContinue)
        #expect(invited.handlerReturned() == .none)
        invited.responseStarted()
        #expect(invited.responseEnded(now: t(2)) == .none)

        var answered = machineAfterHead(at: 1, hasBody: true, expectsContinue: true)
        answered.responseStarted()
        #expect(answered.handlerReturned() == .none)
        #expect(answered.responseEnded(now: t(2)) == .flushAndClose)
        #expect(answered.state == .closing(reason: nil))
    }

    @Test("a request without keep-alive, or a close-delimited response, closes after the response")
    func closeAfterResponse() {
        var m = machineAfterHead(at: 1, keepAlive: false, hasBody: false)
        #expect(m.closesAfterResponse)
        #expect(m.responseEnded(now: t(2)) == .flushAndClose)

        var delimited = machineAfterHead(at: 1, hasBody: false)
        delimited.responseStarted(closeDelimited: true)
        #expect(delimited.closesAfterResponse)
        #expect(delimited.responseEnded(now: t(2)) == .flushAndClose)
    }

    @Test("shutdown while a head is arriving: the request is answered with close")
    func shutdownReadingHead() {
        var m = newMachine()
        m.headBytesReceived(now: t(1))
        #expect(m.shutdown() == .none)
        m.headReceived(now: t(2), keepAlive: true, hasBody: true)
        #expect(m.closesAfterResponse)
        #expect(m.bodyEnded(now: t(3)) == .none)
        #expect(m.responseEnded(now: t(4)) == .flushAndClose)
    }

    @Test("a stalled reader times out; drained output clears the deadline while awaiting the response")
    func outputBlocked() {
        var m = machineAfterHead(at: 1, hasBody: false)
        m.outputBlocked(now: t(5))
        #expect(m.deadline == t(5 + idleTimeout))
        #expect(m.wantsRead(inputFull: false) == false)
        #expect(m.outputDrained(empty: true) == .none)
        #expect(m.deadline == nil)
        m.outputBlocked(now: t(7))
        #expect(m.timerFired(now: t(7 + idleTimeout - 0.5)) == .none)
        #expect(m.timerFired(now: t(7 + idleTimeout)) == .close(reason: "timeout"))
    }

    @Test("a writer refused while streaming is told once when output drains")
    func writerBackpressure() {
        var m = machineAfterHead(at: 1, hasBody: false)
        m.responseStarted()
        m.writerRefused()
        m.outputBlocked(now: t(2))
        #expect(m.outputDrained(empty: false) == .notifyWritable)
        #expect(m.outputDrained(empty: true) == .none)
    }

    @Test("reading while the response is pending stops when the input buffer is full (pipelining)")
    func pipelinedInputBounded() {
        let m = machineAfterHead(at: 1, hasBody: false)
        #expect(m.wantsRead(inputFull: false))
        #expect(m.wantsRead(inputFull: true) == false)
    }

    @Test("a timer firing before an extended deadline does nothing")
    func earlyTimer() {
        var m = newMachine(at: 0)
        m.headReceived(now: t(1), keepAlive: true, hasBody: false)
        #expect(m.responseEnded(now: t(2)) == .readNextRequest)
        #expect(m.timerFired(now: t(headerTimeout)) == .none)
        #expect(m.deadline == t(2 + idleTimeout))
    }
}
