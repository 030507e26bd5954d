import Synchronization

/// The latest values stored, newest last, for the console's analytics panel (docs/console.md):
/// key, value and time, never the subject. Written once per accepted request, from any loop.
public final class RecentValues: Sendable {
    /// How many are kept.
    public static let capacity = 20

    private let held = Mutex<[AnalyticsValue]>([])

    public init() {}

    /// Keeps `values` (stored just now), dropping the oldest past `capacity`.
    public func add(_ values: [AnalyticsValue]) {
        held.withLock { list in
            list.append(contentsOf: values.suffix(Self.capacity))
            if list.count > Self.capacity { list.removeFirst(list.count - Self.capacity) }
        }
    }

    /// The values kept, newest first.
    public func latest() -> [AnalyticsValue] { held.withLock { Array($0.reversed()) } }
}
