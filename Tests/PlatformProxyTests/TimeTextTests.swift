import Testing

@testable import platform_proxy

struct TimeTextTests {
    static let cases: [(Double, String)] = [
        (10, "now"), (-30, "now"), (3540, "in 59 min"), (-120, "2 min ago"), (7200, "in 2 h"),
        (259_200, "in 3 days"), (7_776_000, "in 3 months"), (7_010_000_000, "in 222 years"),
        (1e300, "in over a billion years"), (-1e300, "over a billion years ago"),
    ]

    @Test("relative times read as a person says them", arguments: cases)
    func relative(seconds: Double, text: String) {
        #expect(TimeText.relative(seconds) == text)
    }

    @Test("ISO 8601 in UTC")
    func iso() {
        #expect(TimeText.iso8601(0) == "1970-01-01T00:00:00Z")
        #expect(TimeText.iso8601(1_795_388_400) == "2026-11-22T23:00:00Z")
        #expect(TimeText.describe(1_795_391_940, now: 1_795_388_400) == "2026-11-22T23:59:00Z (in 59 min)")
    }

    @Test("a time outside the years 1 to 9999 says so, never converted")
    func farOff() {
        #expect(TimeText.iso8601(253_402_300_799) == "9999-12-31T23:59:59Z")
        #expect(TimeText.iso8601(1e300) == "after the year 9999")
        #expect(TimeText.iso8601(9.3e18) == "after the year 9999")
        #expect(TimeText.iso8601(-1e300) == "before the year 1")
        #expect(TimeText.iso8601(.infinity) == "after the year 9999")
    }
}
