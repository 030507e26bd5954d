import Testing

@testable import Proxy

private typealias Machine = TunnelStateMachine
private typealias Action = TunnelStateMachine.Action
private typealias State = TunnelStateMachine.State

/// The states a row starts from, each reached through the machine's own events.
private enum Start: CaseIterable {
    case connecting, handshaking, refused, open, drainingToUpstream, drainingToClient, closed

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
        switch self {
        case .drainingToUpstream: _ = m.ended(.client)
        case .drainingToClient: _ = m.ended(.upstream)
        default: break
        }
        return m
    }
}

/// One event applied to a machine.
private enum Event {
    case connected, connectFailed, connectLooped, answerTimedOut
    case answered(Int), answerInvalid, refusalRead
    case ended(Machine.Side), drained, withdraw, failed

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
        case .withdraw: m.withdraw("logout")
        case .failed: m.failed("client_read_error")
        }
    }
}

/// (start, event, action, state after).
private let rows: [(Start, Event, Action, State)] = [
    // Connecting: the connect decides; a client gone or a withdrawal ends it before any byte went up.
    (.connecting, .connected, .sendHandshake, .handshaking),
    (.connecting, .connectFailed, .fail(.unreachable("refused")), .closed(reason: "upstream_unreachable")),
    (.connecting, .connectLooped, .fail(.loop), .closed(reason: "loop_detected")),
    (.connecting, .ended(.client), .close(reason: "client_closed"), .closed(reason: "client_closed")),
    (.connecting, .withdraw, .fail(.withdrawn("logout")), .closed(reason: "logout")),
    (.connecting, .answered(101), .none, .connecting),
    // Handshaking: 101 opens, anything else is read whole and relayed, garbage is a 502.
    (.handshaking, .answered(101), .openBridge, .open),
    (.handshaking, .answered(426), .readRefusal, .refused),
    (.handshaking, .answerInvalid, .fail(.invalidAnswer), .closed(reason: "upstream_invalid_answer")),
    (.handshaking, .ended(.client), .close(reason: "client_closed"), .closed(reason: "client_closed")),
    (.handshaking, .withdraw, .fail(.withdrawn("logout")), .closed(reason: "logout")),
    (.handshaking, .failed, .fail(.unreachable("client_read_error")), .closed(reason: "client_read_error")),
    (.handshaking, .connected, .none, .handshaking),
    (.handshaking, .answerTimedOut, .fail(.timeout), .closed(reason: "upstream_timeout")),
    (.refused, .answerTimedOut, .fail(.timeout), .closed(reason: "upstream_timeout")),
    (.connecting, .answerTimedOut, .none, .connecting),
    (.open, .answerTimedOut, .none, .open),
    // Refused: its body read, it is relayed.
    (.refused, .refusalRead, .relayAnswer, .closed(reason: "upgrade_refused")),
    (.refused, .ended(.client), .close(reason: "client_closed"), .closed(reason: "client_closed")),
    (.refused, .answered(101), .none, .refused),
    // Open: an end drains toward the other side; a withdrawal says goodbye to the client.
    (.open, .ended(.client), .drain, .draining(reason: "client_closed", toward: .upstream)),
    (.open, .ended(.upstream), .drain, .draining(reason: "upstream_closed", toward: .client)),
    (.open, .withdraw, .sayGoodbye, .draining(reason: "logout", toward: .client)),
    (.open, .failed, .close(reason: "client_read_error"), .closed(reason: "client_read_error")),
    (.open, .drained, .none, .open),
    (.open, .answered(101), .none, .open),
    // Draining: the queue emptied closes; the drained side going away closes at once.
    (.drainingToUpstream, .drained, .close(reason: "client_closed"), .closed(reason: "client_closed")),
    (.drainingToUpstream, .ended(.upstream), .close(reason: "upstream_closed"), .closed(reason: "upstream_closed")),
    (.drainingToUpstream, .ended(.client), .none, .draining(reason: "client_closed", toward: .upstream)),
    (.drainingToUpstream, .withdraw, .close(reason: "logout"), .closed(reason: "logout")),
    (.drainingToClient, .drained, .close(reason: "upstream_closed"), .closed(reason: "upstream_closed")),
    (.drainingToClient, .ended(.client), .close(reason: "client_closed"), .closed(reason: "client_closed")),
    (.drainingToClient, .withdraw, .none, .draining(reason: "upstream_closed", toward: .client)),
    // Closed: nothing more happens.
    (.closed, .connected, .none, .closed(reason: "upstream_unreachable")),
    (.closed, .ended(.client), .none, .closed(reason: "upstream_unreachable")),
    (.closed, .withdraw, .none, .closed(reason: "upstream_unreachable")),
    (.closed, .failed, .none, .closed(reason: "upstream_unreachable")),
    (.closed, .drained, .none, .closed(reason: "upstream_unreachable")),
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
        #expect(start.machine.isClosed == (start == .closed), "\(start)")
    }
}
