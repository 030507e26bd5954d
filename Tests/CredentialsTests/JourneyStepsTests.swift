import Testing

@testable import Credentials

struct JourneyStepsTests {
    @Test("a step id is single-use, bound to its client, and expires (manual clock)")
    func rules() {
        var steps = JourneySteps(lifetime: 300, capacity: 4)
        _ = steps.issue("a", flow: 1, client: "c1", now: 0)
        #expect(steps.take("a", client: "c2", now: 1) == nil)  // another client: refused, id kept for its owner
        #expect(steps.take("a", client: "c1", now: 2) == 1)
        #expect(steps.take("a", client: "c1", now: 3) == nil)  // spent
        _ = steps.issue("b", flow: 2, client: "c1", now: 10)
        #expect(steps.take("b", client: "c1", now: 310) == nil)  // expired
        _ = steps.issue("c", flow: 3, client: "c1", now: 400)
        #expect(steps.expire(now: 699) == [])
        #expect(steps.expire(now: 700) == [3])
        #expect(steps.count == 0)
    }

    @Test("beyond capacity the oldest id goes and its flow is reported")
    func capacity() {
        var steps = JourneySteps(lifetime: 300, capacity: 2)
        #expect(steps.issue("a", flow: 1, client: "c", now: 0) == [])
        #expect(steps.issue("b", flow: 2, client: "c", now: 1) == [])
        #expect(steps.issue("c", flow: 3, client: "c", now: 2) == [1])
        #expect(steps.take("a", client: "c", now: 3) == nil)
        #expect(steps.take("c", client: "c", now: 3) == 3)
    }

    @Test("a client starting journeys in a loop evicts its own ids, never another client's")
    func heaviestClientEvictsItsOwn() {
        var steps = JourneySteps(lifetime: 300, capacity: 4)
        #expect(steps.issue("app-a", flow: 1, client: "a", now: 0) == [])
        var dropped: [JourneySteps.FlowID] = []
        for n in 0..<20 { dropped += steps.issue("loop-\(n)", flow: UInt64(100 + n), client: "b", now: Double(1 + n)) }
        #expect(!dropped.contains(1))
        #expect(steps.count == 4)
        #expect(steps.take("app-a", client: "a", now: 30) == 1)
        #expect(steps.take("loop-19", client: "b", now: 30) == 119)
    }

    @Test("when the issuing client holds fewer than another, that other client's oldest goes")
    func newcomerEvictsTheHeaviest() {
        var steps = JourneySteps(lifetime: 300, capacity: 3)
        _ = steps.issue("b1", flow: 1, client: "b", now: 0)
        _ = steps.issue("b2", flow: 2, client: "b", now: 1)
        _ = steps.issue("a1", flow: 3, client: "a", now: 2)
        #expect(steps.issue("c1", flow: 4, client: "c", now: 3) == [1])  // b holds two: its oldest
        // all hold one: c would hold the most, its own goes
        #expect(steps.issue("c2", flow: 5, client: "c", now: 4) == [4])
        #expect(steps.count == 3)
    }
}
