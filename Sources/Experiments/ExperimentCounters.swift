import Synchronization

/// Assignments served and exposures recorded, by experiment and variant, for the metrics.
/// Touched only by `/_platform/experiments` reads, never by proxied requests.
public final class ExperimentCounters: Sendable {
    /// An experiment and one of its variants.
    public struct Key: Hashable, Sendable, Comparable {
        /// The experiment.
        public var experiment: String
        /// The variant.
        public var variant: String

        /// By experiment, then variant: the order metrics are printed in.
        public static func < (a: Key, b: Key) -> Bool { (a.experiment, a.variant) < (b.experiment, b.variant) }
    }

    private let counts = Mutex<(assignments: [Key: Int], exposures: [Key: Int])>(([:], [:]))

    /// Creates zeroed counters.
    public init() {}

    /// Counts assignments returned by a read.
    public func served(_ assignments: [Assignment]) {
        counts.withLock { counts in
            for a in assignments {
                counts.assignments[Key(experiment: a.experiment, variant: a.variant), default: 0] += 1
            }
        }
    }

    /// Counts exposures committed to the analytics queue.
    public func exposed(_ assignments: [Assignment]) {
        counts.withLock { counts in
            for a in assignments {
                counts.exposures[Key(experiment: a.experiment, variant: a.variant), default: 0] += 1
            }
        }
    }

    /// A copy of both tables.
    public func snapshot() -> (assignments: [Key: Int], exposures: [Key: Int]) { counts.withLock { $0 } }
}
