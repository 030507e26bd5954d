/// One experiment's variant for one subject, and why it is that one.
public struct Assignment: Sendable, Equatable {
    /// Why a subject has its variant.
    public enum Reason: String, Sendable, Equatable {
        /// Hashed into the variant's range while the experiment runs.
        case assigned
        /// Disabled or outside `start`/`end`: the first variant.
        case inactive
        /// A QA override (`PUT /_platform/experiments/{name}`).
        case override
    }

    /// The experiment.
    public let experiment: String
    /// The variant.
    public let variant: String
    /// How it was decided.
    public let reason: Reason

    /// An assignment.
    public init(experiment: String, variant: String, reason: Reason) {
        self.experiment = experiment
        self.variant = variant
        self.reason = reason
    }

    /// Whether reading it counts as an exposure: only a hashed assignment is part of the experiment.
    public var isExposure: Bool { reason == .assigned }
}
