import Testing

@testable import EventLoop

struct NanoTimeTests {
    @Test("adding seconds saturates instead of trapping on durations a peer may send")
    func addingSaturates() {
        let now = NanoTime(nanoseconds: 1_000_000_000)
        #expect(now.adding(seconds: 1.5).nanoseconds == 2_500_000_000)
        #expect(now.adding(seconds: 1e13).nanoseconds == Int64(1_000_000_000) + 9_000_000_000_000_000_000)
        #expect(NanoTime(nanoseconds: .max - 1).adding(seconds: 5).nanoseconds == .max)
        #expect(now.adding(seconds: -1e30).nanoseconds == Int64(1_000_000_000) - 9_000_000_000_000_000_000)
        #expect(now.adding(seconds: .infinity).nanoseconds == Int64(1_000_000_000) + 9_000_000_000_000_000_000)
        #expect(now.adding(seconds: .nan).nanoseconds == 1_000_000_000)
    }
}
