import Testing

@testable import Upstream

private typealias State = ConnectionReaper.State

/// Every reaper event.
enum ReaperEvent: String, CaseIterable, Sendable {
    case deadConnection, due, startFailed, stopped

    fileprivate func apply(to state: inout State) -> State.Action {
        switch self {
        case .deadConnection: return state.deadConnectionSeen()
        case .due: return state.due()
        case .startFailed:
            state.startFailed()
            return .none
        case .stopped: return state.stopped()
        }
    }
}

/// Expected `(state, action)` after each event, per start state, in `ReaperEvent.allCases` order.
private let table: [(State, [(State, State.Action)])] = [
    (.idle, [(.scheduled, .schedule), (.idle, .none), (.idle, .none), (.idle, .none)]),
    (.scheduled, [(.scheduled, .none), (.running, .start), (.scheduled, .none), (.scheduled, .none)]),
    (.running, [(.runningAndScheduled, .schedule), (.running, .none), (.idle, .none), (.idle, .remove)]),
    // A prune asked for while the probe runs: when it is due the probe still runs, so it is not started twice.
    (
        .runningAndScheduled,
        [
            (.runningAndScheduled, .none), (.running, .none), (.runningAndScheduled, .none),
            (.scheduled, .remove),
        ]
    ),
]

@Suite("ConnectionReaper: one prune scheduled and one probe running at a time")
struct ConnectionReaperTests {
    @Test("every state and event gives the tabled state and action")
    func stateEventTable() {
        for (start, expected) in table {
            #expect(expected.count == ReaperEvent.allCases.count)
            for (event, (state, action)) in zip(ReaperEvent.allCases, expected) {
                var s = start
                let got = event.apply(to: &s)
                #expect(s == state && got == action, "\(start) + \(event.rawValue): \(s) / \(got)")
            }
        }
    }

    @Test("EOFs while a prune is scheduled schedule nothing more; the next EOF after it ran schedules again")
    func burst() {
        var s = State.idle
        #expect(s.deadConnectionSeen() == .schedule)
        for _ in 0..<5 { #expect(s.deadConnectionSeen() == .none) }
        #expect(s.due() == .start)
        #expect(s.stopped() == .remove)
        #expect(s.deadConnectionSeen() == .schedule)
    }
}
