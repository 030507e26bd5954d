/// The app's lifecycle phase, as posted to `…/phase`.
public enum AppPhase: String, Sendable, CaseIterable {
    /// The app went to the background.
    case background
    /// The app is visible but not receiving events.
    case inactive
    /// The app is in the foreground.
    case active
}

/// Operations begun and not yet finished, each under its full key
/// (`<root>.<path>.operation.<name>`), with its start on a monotonic clock.
///
/// A value; the owner passes the clock in (nanoseconds) and records what
/// `finish` returns. Beginning a running key restarts it. At most `limit`
/// operations are kept; beyond it the longest-running one is forgotten, so an
/// app that never finishes what it begins cannot grow this without bound.
public struct TimedOperations: Sendable {
    private struct Running: Sendable {
        var start: Int64
        var cancelOn: [AppPhase]
    }

    private var running: [String: Running] = [:]
    private let limit: Int

    /// No operations; at most `limit` kept at once (default 10,000).
    public init(limit: Int = 10_000) {
        self.limit = max(1, limit)
    }

    /// Number of running operations.
    public var count: Int { running.count }

    /// Starts (or restarts) the operation `key` at `now` (monotonic ns), cancelled by any of `cancelOn`.
    public mutating func begin(key: String, cancelOn: [AppPhase], now: Int64) {
        if running[key] == nil, running.count >= limit,
            let oldest = running.min(by: { $0.value.start < $1.value.start })
        {
            running[oldest.key] = nil
        }
        running[key] = Running(start: now, cancelOn: cancelOn)
    }

    /// Ends the first running key of `keys` (most specific first) and returns it with
    /// the whole milliseconds since it began; nil when none is running.
    public mutating func finish(searchingFrom keys: [String], now: Int64) -> (key: String, milliseconds: Int64)? {
        guard let key = keys.first(where: { running[$0] != nil }), let operation = running.removeValue(forKey: key)
        else {
            return nil
        }
        let elapsed = now.subtractingReportingOverflow(operation.start)
        let nanoseconds = elapsed.overflow ? 0 : max(0, elapsed.partialValue)
        return (key, nanoseconds / 1_000_000)
    }

    /// Drops the first running key of `keys` and returns it; nil when none is running.
    public mutating func cancel(searchingFrom keys: [String]) -> String? {
        guard let key = keys.first(where: { running[$0] != nil }) else { return nil }
        running[key] = nil
        return key
    }

    /// Drops every operation registered to be cancelled by `phase`; returns their keys, sorted.
    public mutating func phase(_ phase: AppPhase) -> [String] {
        let cancelled = running.filter { $0.value.cancelOn.contains(phase) }.keys.sorted()
        for key in cancelled { running[key] = nil }
        return cancelled
    }
}
