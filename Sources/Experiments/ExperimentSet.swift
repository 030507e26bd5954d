import Config

/// Every configured experiment, compiled once per config and never mutated: requests on any
/// loop read it without a lock.
public struct ExperimentSet: Sendable {
    /// The experiments in config order.
    public let plans: [ExperimentPlan]

    /// Compiles `experiments`.
    public init(_ experiments: [ExperimentConfiguration]) {
        plans = experiments.map(ExperimentPlan.init)
    }

    /// Whether no experiment is configured.
    public var isEmpty: Bool { plans.isEmpty }

    /// The experiment named `name`.
    public func plan(named name: some StringProtocol) -> ExperimentPlan? { plans.first { $0.name == name } }

    /// One experiment's assignment: an override naming one of its variants wins, then the hash.
    public func assignment(_ plan: ExperimentPlan, subject: String, now: Double, overrides: ExperimentOverrides)
        -> Assignment
    {
        if let forced = overrides.variant(for: plan.name), plan.variants.contains(forced) {
            return Assignment(experiment: plan.name, variant: forced, reason: .override)
        }
        guard plan.isRunning(at: now) else {
            return Assignment(experiment: plan.name, variant: plan.variants[0], reason: .inactive)
        }
        return Assignment(experiment: plan.name, variant: plan.variant(for: subject, at: now), reason: .assigned)
    }

    /// Every experiment's assignment, in config order.
    public func assignments(subject: String, now: Double, overrides: ExperimentOverrides) -> [Assignment] {
        plans.map { assignment($0, subject: subject, now: now, overrides: overrides) }
    }

    /// The `X-Experiments` value: `name=variant; name=variant`, in config order.
    public func headerValue(subject: String, now: Double, overrides: ExperimentOverrides) -> String {
        assignments(subject: subject, now: now, overrides: overrides).map { "\($0.experiment)=\($0.variant)" }
            .joined(separator: "; ")
    }

    /// The first instant after `now` at which some experiment starts or ends: assignments made
    /// now stay valid until then.
    public func nextChange(after now: Double) -> Double? {
        plans.compactMap { $0.nextChange(after: now) }.min()
    }
}
