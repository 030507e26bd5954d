import Testing

@testable import Proxy

/// One row: the events fed to a new flow in turn, the actions they must give, and the state after.
struct EventStreamFlowCase: CustomTestStringConvertible, Sendable {
    enum Step: Sendable {
        case offer(EventStreamFlow.Item, queued: Int)
        case drained(queued: Int)
    }
    let name: String
    let steps: [Step]
    let actions: [EventStreamFlow.Action]
    let state: EventStreamFlow.State
    var testDescription: String { name }
}

private let hold = EventStreamFlow.holdAt
private let a = EventStreamFlow.Item.state(provider: "a")
private let b = EventStreamFlow.Item.state(provider: "b")
private func event(_ size: Int) -> EventStreamFlow.Item { .event(Array(repeating: UInt8(ascii: "x"), count: size)) }

@Suite("EventStreamFlow")
struct EventStreamFlowTests {
    static let cases: [EventStreamFlowCase] = [
        EventStreamFlowCase(
            name: "a client that keeps up gets every item at once",
            steps: [
                .offer(a, queued: 0), .offer(b, queued: 300), .offer(event(40), queued: hold - 1),
                .offer(.keepAlive, queued: 0),
            ],
            actions: [.write([a]), .write([b]), .write([event(40)]), .write([.keepAlive])], state: .flowing),
        EventStreamFlowCase(
            name: "behind: nothing more is queued, each provider's state is held once, in order of change",
            steps: [
                .offer(a, queued: hold), .offer(b, queued: hold), .offer(a, queued: hold), .offer(b, queued: hold),
            ],
            actions: [.waitForDrain, .none, .none, .none], state: .behind(held: [a, b], heldBytes: 0)),
        EventStreamFlowCase(
            name: "events are held in order between the states and counted",
            steps: [
                .offer(a, queued: hold), .offer(event(10), queued: hold), .offer(a, queued: hold),
                .offer(event(20), queued: hold),
            ],
            actions: [.waitForDrain, .none, .none, .none],
            state: .behind(held: [a, event(10), event(20)], heldBytes: 30)),
        EventStreamFlowCase(
            name: "a drain below the hold mark writes what was held, and the stream flows again",
            steps: [
                .offer(a, queued: hold), .offer(event(10), queued: hold + 100), .drained(queued: hold - 1),
                .offer(b, queued: 0),
            ],
            actions: [.waitForDrain, .none, .write([a, event(10)]), .write([b])], state: .flowing),
        EventStreamFlowCase(
            name: "a drain that leaves the output above the hold mark waits for the next one",
            steps: [.offer(a, queued: hold + 500), .drained(queued: hold), .drained(queued: 0)],
            actions: [.waitForDrain, .waitForDrain, .write([a])], state: .flowing),
        EventStreamFlowCase(
            name: "the keep-alive is dropped for a stream with bytes waiting",
            steps: [
                .offer(.keepAlive, queued: hold), .offer(a, queued: hold), .offer(.keepAlive, queued: hold),
                .drained(queued: 0),
            ],
            actions: [.none, .waitForDrain, .none, .write([a])], state: .flowing),
        EventStreamFlowCase(
            name: "held events past the cap close the stream, and nothing follows",
            steps: [
                .offer(event(100), queued: hold), .offer(event(EventStreamFlow.cap - hold - 100), queued: hold),
                .offer(event(1), queued: hold), .offer(a, queued: 0), .drained(queued: 0),
            ],
            actions: [.waitForDrain, .none, .close, .none, .none], state: .closed),
        EventStreamFlowCase(
            name: "states alone never reach the cap",
            steps: Array(repeating: .offer(a, queued: EventStreamFlow.cap - 1), count: 50)
                + [.offer(b, queued: EventStreamFlow.cap - 1)],
            actions: [.waitForDrain] + Array(repeating: .none, count: 50),
            state: .behind(held: [a, b], heldBytes: 0)),
        EventStreamFlowCase(
            name: "a drain without anything held writes nothing",
            steps: [.drained(queued: 0), .offer(.keepAlive, queued: hold), .drained(queued: 0)],
            actions: [.none, .none, .none], state: .flowing),
    ]

    @Test("each row gives its actions in order and ends in its state", arguments: cases)
    func table(_ row: EventStreamFlowCase) {
        var flow = EventStreamFlow()
        var actions: [EventStreamFlow.Action] = []
        for step in row.steps {
            switch step {
            case .offer(let item, let queued): actions.append(flow.offer(item, queued: queued))
            case .drained(let queued): actions.append(flow.drained(queued: queued))
            }
        }
        #expect(actions == row.actions)
        #expect(flow.state == row.state)
    }

    @Test("the end hands over what was held and closes the flow")
    func endHandsOverHeldItems() {
        var flow = EventStreamFlow()
        _ = flow.offer(a, queued: hold)
        _ = flow.offer(event(5), queued: hold)
        #expect(flow.end() == [a, event(5)])
        #expect(flow.state == .closed)
        #expect(flow.offer(b, queued: 0) == .none)
        var flowing = EventStreamFlow()
        #expect(flowing.end() == [])
    }
}
