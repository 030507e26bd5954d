import Testing

@testable import Upstream

private typealias Lifecycle = UpstreamTunnelLifecycle

/// The states a row starts from, each reached through the lifecycle's own events.
private enum Start: CaseIterable {
    case connecting, connected, failed, closed

    var lifecycle: Lifecycle {
        var l = Lifecycle()
        switch self {
        case .connecting: break
        case .connected: _ = l.connected(fd: 7)
        case .failed: _ = l.connectFailed(.unreachable("refused"))
        case .closed: _ = l.close()
        }
        return l
    }
}

/// One event applied to a lifecycle.
private enum Event {
    case connected, connectFailed, close

    func apply(_ l: inout Lifecycle) -> Lifecycle.Action {
        switch self {
        case .connected: l.connected(fd: 9)
        case .connectFailed: l.connectFailed(.loop("own listener"))
        case .close: l.close()
        }
    }
}

/// (start, event, action, state after, fd after).
private let rows: [(Start, Event, Lifecycle.Action, Lifecycle.State, CInt)] = [
    // The connect ends once: connected (reported nil) or failed (reported with why).
    (.connecting, .connected, .report(nil), .connected(fd: 9), 9),
    (.connecting, .connectFailed, .report(.loop("own listener")), .failed, -1),
    // Closing releases the handle once, whatever came before.
    (.connecting, .close, .release, .closed, -1),
    (.connected, .close, .release, .closed, -1),
    (.failed, .close, .release, .closed, -1),
    (.closed, .close, .none, .closed, -1),
    // A second end of the connect, or one after the close, changes nothing.
    (.connected, .connected, .none, .connected(fd: 7), 7),
    (.connected, .connectFailed, .none, .connected(fd: 7), 7),
    (.failed, .connected, .none, .failed, -1),
    (.closed, .connected, .none, .closed, -1),
    (.closed, .connectFailed, .none, .closed, -1),
]

@Test(arguments: rows.indices)
func upstreamTunnelLifecycleRow(_ index: Int) {
    let (start, event, action, state, fd) = rows[index]
    var lifecycle = start.lifecycle
    #expect(event.apply(&lifecycle) == action, "row \(index): \(start) + \(event)")
    #expect(lifecycle.state == state, "row \(index): \(start) + \(event)")
    #expect(lifecycle.fd == fd, "row \(index): \(start) + \(event)")
}
