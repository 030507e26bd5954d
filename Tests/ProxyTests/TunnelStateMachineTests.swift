import Testing

@testable import Proxy

private typealias Machine = TunnelStateMachine
private typealias Action = TunnelStateMachine.Action
private typealias State = TunnelStateMachine.State

/// The states a row starts from, each reached through the machine's own events.
private enum Start: CaseIterable {
    case connecting, handshaking, refused, bridging, open, finishingFrame, drainingToUpstream, drainingToClient
    case closed

    var machine: Machine {
        var m = Machine()
        switch self {
        case .connecting: return m
        case .closed:
            _ = m.connectFailed("refused")
            return m
        default: _ = m.connected()
        }
        switch self {
        case .handshaking: return m
        case .refused:
            _ = m.answered(status: 403)
            return m
        default: _ = m.answered(status: 101)
        }
        if self == .bridging { return m }
        _ = m.bridged()
        switch self {
        case .drainingToUpstream: _ = m.ended(.client)
        case .drainingToClient: _ = m.ended(.upstream)
        case .finishingFrame: _ = m.withdraw("logout", atBoundary: false)
        default: break
        }
        return m
    }
}

/// One event applied to a machine.
private enum Event {
    case connected, connectFailed, connectLooped, answerTimedOut
    case answered(Int), answerInvalid, refusalRead
    case bridged, ended(Machine.Side), drained, withdraw, withdrawMidFrame, frameFinished, failed

    func apply(_ m: inout Machine) -> Action {
        switch self {
        case .connected: m.connected()
        case .connectFailed: m.connectFailed("refused")
        case .connectLooped: m.connectFailed("own listener", loop: true)
        case .answerTimedOut: m.answerTimedOut()
        case .answered(let status): m.answered(status: status)
        case .answerInvalid: m.answerInvalid()
        case .refusalRead: m.refusalRead()
        case .ended(let side): m.ended(side)
        case .drained: m.drained()
        case .bridged: m.bridged()
        case .withdraw: m.withdraw("shutting_down")
        case .withdrawMidFrame: m.withdraw("shutting_down", atBoundary: false)
        case .frameFinished: m.frameFinished()
        case .failed: m.failed("client_read_error")
        }
    }
}

/// A closed state: `opened` says whether the client had had the 101.
private func closed(_ reason: String, opened: Bool = false) -> State { .closed(reason: reason, opened: opened) }

/// (start, event, action, state after).
private let rows: [(Start, Event, Action, State)] = [
    // Connecting: the connect decides; a client gone or a withdrawal ends it before any byte went up.
    (.connecting, .connected, .sendHandshake, .handshaking),
    (.connecting, .connectFailed, .fail(.unreachable("refused")), closed("upstream_unreachable")),
    (.connecting, .connectLooped, .fail(.loop), closed("loop_detected")),
    (.connecting, .ended(.client), .close(reason: "client_closed"), closed("client_closed")),
    (.connecting, .withdraw, .fail(.withdrawn("shutting_down")), closed("shutting_down")),
    (.connecting, .answered(101), .none, .connecting),
    (.connecting, .bridged, .none, .connecting),
    // Handshaking: 101 takes the client socket, anything else is read whole and relayed, garbage is a 502.
    (.handshaking, .answered(101), .openBridge, .bridging),
    (.handshaking, .answered(426), .readRefusal, .refused),
    (.handshaking, .answerInvalid, .fail(.invalidAnswer), closed("upstream_invalid_answer")),
    (.handshaking, .ended(.client), .close(reason: "client_closed"), closed("client_closed")),
    (.handshaking, .withdraw, .fail(.withdrawn("shutting_down")), closed("shutting_down")),
    (.handshaking, .failed, .fail(.unreachable("client_read_error")), closed("client_read_error")),
    (.handshaking, .connected, .none, .handshaking),
    (.handshaking, .answerTimedOut, .fail(.timeout), closed("upstream_timeout")),
    (.refused, .answerTimedOut, .fail(.timeout), closed("upstream_timeout")),
    (.connecting, .answerTimedOut, .none, .connecting),
    (.open, .answerTimedOut, .none, .open),
    // Refused: its body read, it is relayed.
    (.refused, .refusalRead, .relayAnswer, closed("upgrade_refused")),
    (.refused, .ended(.client), .close(reason: "client_closed"), closed("client_closed")),
    (.refused, .answered(101), .none, .refused),
    (.refused, .bridged, .none, .refused),
    // Bridging: the socket taken over opens the tunnel; a failed hand-over closes it unopened.
    (.bridging, .bridged, .relay, .open),
    (.bridging, .failed, .close(reason: "client_read_error"), closed("client_read_error")),
    (.bridging, .ended(.client), .close(reason: "client_closed"), closed("client_closed")),
    (.bridging, .withdraw, .close(reason: "shutting_down"), closed("shutting_down")),
    (.bridging, .answered(101), .none, .bridging),
    // Open: an end drains toward the other side; a withdrawal says goodbye to the client at a
    // frame boundary, or first lets the upstream finish its frame.
    (.open, .ended(.client), .drain, .draining(reason: "client_closed", toward: .upstream)),
    (.open, .ended(.upstream), .drain, .draining(reason: "upstream_closed", toward: .client)),
    (.open, .withdraw, .sayGoodbye, .draining(reason: "shutting_down", toward: .client)),
    (.open, .withdrawMidFrame, .finishFrame, .finishingFrame(reason: "shutting_down")),
    (.open, .failed, .close(reason: "client_read_error"), closed("client_read_error", opened: true)),
    (.open, .drained, .none, .open),
    (.open, .answered(101), .none, .open),
    (.open, .bridged, .none, .open),
    (.open, .frameFinished, .none, .open),
    // Finishing the upstream's frame: its end brings the goodbye; the client leaving, the upstream
    // ending inside the frame or the deadline close without one.
    (.finishingFrame, .frameFinished, .sayGoodbye, .draining(reason: "logout", toward: .client)),
    (.finishingFrame, .ended(.client), .close(reason: "client_closed"), closed("client_closed", opened: true)),
    (.finishingFrame, .ended(.upstream), .close(reason: "logout"), closed("logout", opened: true)),
    (.finishingFrame, .failed, .close(reason: "client_read_error"), closed("client_read_error", opened: true)),
    (.finishingFrame, .withdraw, .none, .finishingFrame(reason: "logout")),
    (.finishingFrame, .drained, .none, .finishingFrame(reason: "logout")),
    // Draining: the queue emptied closes; the drained side going away closes at once.
    (.drainingToUpstream, .drained, .close(reason: "client_closed"), closed("client_closed", opened: true)),
    (
        .drainingToUpstream, .ended(.upstream), .close(reason: "upstream_closed"),
        closed("upstream_closed", opened: true)
    ),
    (.drainingToUpstream, .ended(.client), .none, .draining(reason: "client_closed", toward: .upstream)),
    (.drainingToUpstream, .withdraw, .close(reason: "shutting_down"), closed("shutting_down", opened: true)),
    (.drainingToUpstream, .frameFinished, .none, .draining(reason: "client_closed", toward: .upstream)),
    (.drainingToClient, .drained, .close(reason: "upstream_closed"), closed("upstream_closed", opened: true)),
    (.drainingToClient, .ended(.client), .close(reason: "client_closed"), closed("client_closed", opened: true)),
    (.drainingToClient, .withdraw, .none, .draining(reason: "upstream_closed", toward: .client)),
    (.drainingToClient, .withdrawMidFrame, .none, .draining(reason: "upstream_closed", toward: .client)),
    // Closed: nothing more happens.
    (.closed, .connected, .none, closed("upstream_unreachable")),
    (.closed, .ended(.client), .none, closed("upstream_unreachable")),
    (.closed, .withdraw, .none, closed("upstream_unreachable")),
    (.closed, .failed, .none, closed("upstream_unreachable")),
    (.closed, .drained, .none, closed("upstream_unreachable")),
    (.closed, .bridged, .none, closed("upstream_unreachable")),
    (.closed, .frameFinished, .none, closed("upstream_unreachable")),
]

@Test(arguments: rows.indices)
func tunnelStateMachineRow(_ index: Int) {
    let (start, event, action, state) = rows[index]
    var machine = start.machine
    #expect(event.apply(&machine) == action, "row \(index): \(start) + \(event)")
    #expect(machine.state == state, "row \(index): \(start) + \(event)")
}

@Test func tunnelReadsOnlyWhileOpen() {
    for start in Start.allCases {
        #expect(start.machine.isOpen == (start == .open), "\(start)")
        #expect(start.machine.readsUpstream == (start == .open || start == .finishingFrame), "\(start)")
        #expect(start.machine.isClosed == (start == .closed), "\(start)")
    }
}

/// Whether the client had the 101 is the state's: it holds from `bridged` on, through the close.
@Test func tunnelOpenedFromTheBridgeOn() {
    let opened: Set<String> = ["open", "finishingFrame", "drainingToUpstream", "drainingToClient"]
    for start in Start.allCases {
        #expect(start.machine.opened == opened.contains("\(start)"), "\(start)")
    }
}
