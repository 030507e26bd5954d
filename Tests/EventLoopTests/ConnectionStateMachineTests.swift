import Testing
@testable import EventLoop

/// Manual clock: seconds after an arbitrary non-zero origin, so no test depends on real time.
private func t(_ seconds: Double) -> NanoTime {
    NanoTime(nanoseconds: 1_000_000_000_000 + Int64(seconds * 1_000_000_000))
}

private let headerTimeout = 10.0
private let idleTimeout = 60.0

private func newMachine(at seconds: Double = 0) -> ConnectionStateMachine {
    ConnectionStateMachine(now: t(seconds), headerTimeout: headerTimeout, idleTimeout: idleTimeout)
}

/// A machine that has just received a complete head at `seconds`.
private func machineAfterHead(at seconds: Double = 1, keepAlive: Bool = true, hasBody: Bool) -> ConnectionStateMachine {
    var m = newMachine()
    m.headBytesReceived(now: t(seconds))
    m.headReceived(now: t(seconds), keepAlive: keepAlive, hasBody: hasBody)
    return m
}

@Suite("ConnectionStateMachine")
struct ConnectionStateMachineTests {
    @Test("a new connection must send its first head within the header timeout of accept")
    func newConnectionDeadline() {
        var m = newMachine(at: 0)
        #expect(m.phase == .idle)
        #expect(m.deadline == t(headerTimeout))
        #expect(m.timerFired(now: t(9.999)) == .proceed)
        #expect(m.phase == .idle)
        #expect(m.timerFired(now: t(10)) == .close)
        #expect(m.phase == .closed)
    }

    @Test("slow-loris: trickling head bytes never extend the header deadline")
    func slowLoris() {
        var m = newMachine(at: 0)
        for second in [1.0, 3, 5, 7, 9, 9.9] {
            m.headBytesReceived(now: t(second))
            #expect(m.phase == .readingHead)
            #expect(m.deadline == t(headerTimeout))
        }
        #expect(m.timerFired(now: t(9.99)) == .proceed)
        #expect(m.phase == .readingHead)
        #expect(m.timerFired(now: t(10.5)) == .close)
        #expect(m.phase == .closed)
    }

    @Test("keep-alive: idle timeout between requests, header timeout from the next request's first byte")
    func keepAliveCycle() {
        var m = machineAfterHead(at: 1, hasBody: false)
        #expect(m.phase == .awaitingResponse)
        #expect(m.deadline == nil)
        // The handler may take as long as it likes: no deadline applies.
        #expect(m.timerFired(now: t(10_000)) == .proceed)
        #expect(m.closesAfterResponse == false)

        #expect(m.responseEnded(now: t(2)) == .readNextRequest)
        #expect(m.phase == .idle)
        #expect(m.deadline == t(2 + idleTimeout))

        m.headBytesReceived(now: t(30))
        #expect(m.phase == .readingHead)
        #expect(m.deadline == t(30 + headerTimeout))
        m.headBytesReceived(now: t(35))
        #expect(m.deadline == t(30 + headerTimeout))

        m.headReceived(now: t(36), keepAlive: true, hasBody: false)
        #expect(m.phase == .awaitingResponse)
        #expect(m.deadline == nil)
        #expect(m.responseEnded(now: t(37)) == .readNextRequest)
        #expect(m.deadline == t(37 + idleTimeout))
    }

    @Test("an idle keep-alive connection closes at the idle deadline")
    func idleTimeoutCloses() {
        var m = machineAfterHead(at: 1, hasBody: false)
        #expect(m.responseEnded(now: t(2)) == .readNextRequest)
        #expect(m.timerFired(now: t(2 + idleTimeout - 0.001)) == .proceed)
        #expect(m.timerFired(now: t(2 + idleTimeout)) == .close)
        #expect(m.phase == .closed)
    }

    @Test("body progress restarts the idle deadline; body end clears it")
    func bodyProgressExtendsDeadline() {
        var m = machineAfterHead(at: 1, hasBody: true)
        #expect(m.phase == .readingBody)
        #expect(m.deadline == t(1 + idleTimeout))
        m.bodyProgress(now: t(50))
        #expect(m.deadline == t(50 + idleTimeout))
        // The timer armed for the old deadline fires: the deadline moved, so nothing happens.
        #expect(m.timerFired(now: t(1 + idleTimeout)) == .proceed)
        #expect(m.phase == .readingBody)

        #expect(m.bodyEnded(now: t(100)) == .proceed)
        #expect(m.phase == .awaitingResponse)
        #expect(m.deadline == nil)
        #expect(m.responseEnded(now: t(101)) == .readNextRequest)
        #expect(m.phase == .idle)
    }

    @Test("a stalled body upload times out at the idle deadline")
    func stalledBodyCloses() {
        var m = machineAfterHead(at: 1, hasBody: true)
        m.bodyProgress(now: t(5))
        #expect(m.timerFired(now: t(5 + idleTimeout)) == .close)
        #expect(m.phase == .closed)
    }

    @Test("body progress outside a body does not touch the deadline")
    func bodyProgressIgnoredOutsideBody() {
        var m = newMachine(at: 0)
        m.bodyProgress(now: t(5))
        #expect(m.deadline == t(headerTimeout))
    }

    @Test("a response that ends before the body: the body's end completes the exchange")
    func earlyResponse() {
        var m = machineAfterHead(at: 1, hasBody: true)
        #expect(m.responseEnded(now: t(2)) == .proceed)
        #expect(m.phase == .readingBody)
        m.bodyProgress(now: t(3))
        #expect(m.bodyEnded(now: t(4)) == .readNextRequest)
        #expect(m.phase == .idle)
        #expect(m.deadline == t(4 + idleTimeout))
    }

    @Test("responseEnded(mustClose:) while the body is pending closes and marks the response close")
    func mustCloseWithPendingBody() {
        var m = machineAfterHead(at: 1, hasBody: true)
        #expect(m.responseEnded(now: t(2), mustClose: true) == .close)
        #expect(m.keepAlive == false)
        #expect(m.closesAfterResponse)
    }

    @Test("mustClose after a complete request still closes")
    func mustCloseAfterCompleteRequest() {
        var m = machineAfterHead(at: 1, hasBody: false)
        #expect(m.responseEnded(now: t(2), mustClose: true) == .close)
        #expect(m.phase == .closed)
    }

    @Test("a request without keep-alive closes after its response")
    func noKeepAliveCloses() {
        var m = machineAfterHead(at: 1, keepAlive: false, hasBody: false)
        #expect(m.closesAfterResponse)
        #expect(m.responseEnded(now: t(2)) == .close)
        #expect(m.phase == .closed)
    }

    @Test("a response with no length (close-delimited) ends the connection")
    func closeDelimitedResponse() {
        var m = machineAfterHead(at: 1, hasBody: false)
        m.responseWillBeCloseDelimited()
        #expect(m.closesAfterResponse)
        #expect(m.responseEnded(now: t(2)) == .close)
    }

    @Test("client half-close before a complete request closes at once", arguments: ["idle", "readingHead", "readingBody"])
    func inputEndedEarly(phase: String) {
        var m = newMachine()
        switch phase {
        case "readingHead": m.headBytesReceived(now: t(1))
        case "readingBody": m.headReceived(now: t(1), keepAlive: true, hasBody: true)
        default: break
        }
        #expect(m.inputEnded() == .close)
        #expect(m.phase == .closed)
        #expect(m.inputClosed)
    }

    @Test("client FIN while the response is pending: the client left, close now (nginx's client abort)")
    func inputEndedAwaitingResponse() {
        var m = machineAfterHead(at: 1, hasBody: false)
        #expect(m.inputEnded() == .close)
        #expect(m.phase == .closed)
        #expect(m.inputClosed)
    }

    @Test("closesAfterResponse reflects keep-alive, shutdown and a closed input")
    func closesAfterResponse() {
        #expect(newMachine().closesAfterResponse == false)
        #expect(machineAfterHead(hasBody: false).closesAfterResponse == false)
        #expect(machineAfterHead(keepAlive: false, hasBody: false).closesAfterResponse)

        var shut = machineAfterHead(hasBody: false)
        _ = shut.shutdown()
        #expect(shut.closesAfterResponse)

        var halfClosed = machineAfterHead(hasBody: false)
        _ = halfClosed.inputEnded()
        #expect(halfClosed.closesAfterResponse)
    }

    @Test("shutdown closes an idle connection now")
    func shutdownIdle() {
        var fresh = newMachine()
        #expect(fresh.shutdown() == .close)
        #expect(fresh.phase == .closed)

        var between = machineAfterHead(hasBody: false)
        #expect(between.responseEnded(now: t(2)) == .readNextRequest)
        #expect(between.shutdown() == .close)
        #expect(between.phase == .closed)
    }

    @Test("shutdown lets a busy connection finish its response, then closes")
    func shutdownBusy() {
        var m = machineAfterHead(at: 1, hasBody: false)
        #expect(m.shutdown() == .proceed)
        #expect(m.phase == .awaitingResponse)
        #expect(m.responseEnded(now: t(2)) == .close)
        #expect(m.phase == .closed)
    }

    @Test("shutdown while a head is arriving: the request is answered with close")
    func shutdownReadingHead() {
        var m = newMachine()
        m.headBytesReceived(now: t(1))
        #expect(m.shutdown() == .proceed)
        m.headReceived(now: t(2), keepAlive: true, hasBody: true)
        #expect(m.keepAlive == false)
        #expect(m.closesAfterResponse)
        #expect(m.bodyEnded(now: t(3)) == .proceed)
        #expect(m.responseEnded(now: t(4)) == .close)
    }

    @Test("a stalled reader times out; unblocked output clears the deadline while awaiting the response")
    func outputBlocked() {
        var m = machineAfterHead(at: 1, hasBody: false)
        #expect(m.deadline == nil)
        m.outputBlocked(true, now: t(5))
        #expect(m.deadline == t(5 + idleTimeout))
        m.outputBlocked(false, now: t(6))
        #expect(m.deadline == nil)

        m.outputBlocked(true, now: t(7))
        #expect(m.timerFired(now: t(7 + idleTimeout - 0.5)) == .proceed)
        #expect(m.timerFired(now: t(7 + idleTimeout)) == .close)
        #expect(m.phase == .closed)
    }

    @Test("the body ending while output is blocked keeps the stalled-reader deadline")
    func bodyEndedWhileBlocked() {
        var m = machineAfterHead(at: 1, hasBody: true)
        m.outputBlocked(true, now: t(2))
        #expect(m.bodyEnded(now: t(3)) == .proceed)
        #expect(m.deadline == t(3 + idleTimeout))
    }

    @Test("a timer firing before an extended deadline does nothing")
    func earlyTimer() {
        var m = newMachine(at: 0)
        m.headReceived(now: t(1), keepAlive: true, hasBody: false)
        #expect(m.responseEnded(now: t(2)) == .readNextRequest)
        // The timer was armed for the header deadline (10 s), now the idle deadline (62 s) applies.
        #expect(m.timerFired(now: t(headerTimeout)) == .proceed)
        #expect(m.phase == .idle)
        #expect(m.deadline == t(2 + idleTimeout))
    }
}
