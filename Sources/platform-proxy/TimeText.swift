import Glibc

/// Times for people: an ISO 8601 UTC date with a relative phrase ("2026-11-22T23:40:00Z, in 59 min").
enum TimeText {
    /// `time` (Unix seconds) as ISO 8601 and relative to `now`.
    static func describe(_ time: Double, now: Double) -> String {
        "\(iso8601(time)) (\(relative(time - now)))"
    }

    /// "2026-11-22T23:40:00Z"; a time outside the years 1 to 9999 says so (an `exp` claim is any
    /// JSON number: converted to `time_t` it could trap).
    static func iso8601(_ time: Double) -> String {
        // A provider's `expires_in` or a token's `exp` can be any number: past year 9999 (or
        // before year 1) there is no date to print, and `time_t` of a huge one would trap.
        guard time.isFinite, time >= -62_135_596_800, time < 253_402_300_800 else {
            return time > 0 ? "after the year 9999" : "before the year 1"
        }
        var t = time_t(time.rounded(.down))
        var parts = tm()
        gmtime_r(&t, &parts)
        func two(_ v: Int32) -> String { v < 10 ? "0\(v)" : "\(v)" }
        return "\(Int(parts.tm_year) + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))T"
            + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec))Z"
    }

    /// "in 59 min", "3 days ago", "in 222 years", "now".
    static func relative(_ seconds: Double) -> String {
        let magnitude = abs(seconds)
        let text: String
        switch magnitude {
        case ..<45: return "now"
        case ..<5400: text = "\(Int((magnitude / 60).rounded())) min"
        case ..<(48 * 3600): text = "\(Int((magnitude / 3600).rounded())) h"
        case ..<(60 * 86400): text = "\(Int((magnitude / 86400).rounded())) days"
        case ..<(730 * 86400): text = "\(Int((magnitude / (30.44 * 86400)).rounded())) months"
        default:
            // Bounded before the conversion: a far-off time must not trap.
            let years = (magnitude / (365.25 * 86400)).rounded(.down)
            text = years < 1e9 ? "\(Int(years)) years" : "over a billion years"
        }
        return seconds >= 0 ? "in \(text)" : "\(text) ago"
    }
}
