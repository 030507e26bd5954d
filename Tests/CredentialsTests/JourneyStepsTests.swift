import Testing
@testable import Credentials

struct JourneyStepsTests {
    @Test("a step id is single-use, bound to its client, and expires (manual clock)")
    func rules() {
        var steps = JourneySteps(lifetime: 300, capacity: 4)
        _ = steps.issue("a", flow: 1, client: "c1", now: 0)
        #expect(steps.take("a", client: "c2", now: 1) == nil)   // another client: refused, id kept for its owner
        #expect(steps.take("a", client: "c1", now: 2) == 1)
        #expect(steps.take("a", client: "c1", now: 3) == nil)   // spent
        _ = steps.issue("b", flow: 2, client: "c1", now: 10)
        #expect(steps.take("b", client: "c1", now: 310) == nil) // expired
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
}
