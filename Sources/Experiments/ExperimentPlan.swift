import Config

/// One experiment compiled for assignment: its hash seed and its variants' bucket ranges.
///
/// Ranges follow GrowthBook's `getBucketRanges` with coverage 1 (`packages/sdk-js/src/util.ts`):
/// weights are normalised to sum to 1 and laid end to end in config order, variant `i`
/// owning `[start_i, start_i + w_i)`; `chooseVariation` picks the range holding the hash.
/// Because the layout is cumulative and in config order, a weight change moves only the
/// subjects whose hash lies between an old and a new boundary: with two variants that is
/// exactly the share that must move; with more, moving weight between neighbours moves
/// only the boundary between them.
public struct ExperimentPlan: Sendable {
    /// The experiment's name.
    public let name: String
    /// Variant names in config order; the first is the default.
    public let variants: [String]
    /// GrowthBook seed: `<salt>:<name>`, or the bare name when there is no salt (GrowthBook's default seed is the experiment key).
    public let seed: String
    /// `[start, end)` per variant, as fractions of the hash space.
    public let ranges: [(start: Double, end: Double)]
    let enabled: Bool
    let start: Double?
    let end: Double?

    /// Compiles `configuration` (already validated: at least one variant, a positive total weight).
    public init(_ configuration: ExperimentConfiguration) {
        name = configuration.name
        variants = configuration.variants.map(\.name)
        seed = configuration.salt.isEmpty ? configuration.name : configuration.salt + ":" + configuration.name
        let total = configuration.variants.reduce(0) { $0 + $1.weight }
        var cumulative = 0.0
        ranges = configuration.variants.map { variant in
            let start = cumulative
            cumulative += variant.weight / total
            return (start, cumulative)
        }
        enabled = configuration.enabled
        start = configuration.start
        end = configuration.end
    }

    /// Whether subjects are split at `now` (Unix seconds): enabled and inside `[start, end)`.
    public func isRunning(at now: Double) -> Bool {
        enabled && (start.map { now >= $0 } ?? true) && (end.map { now < $0 } ?? true)
    }

    /// The variant index for a hash fraction `n` (GrowthBook's `chooseVariation`); the first
    /// variant when no range holds it (GrowthBook's -1; with full coverage only rounding at the
    /// very top of the space could cause it, above the largest hash, 0.9999).
    public func variantIndex(forHash n: Double) -> Int {
        ranges.firstIndex { n >= $0.start && n < $0.end } ?? 0
    }

    /// The variant `subject` gets at `now`: its hashed range while running, else the first.
    public func variant(for subject: String, at now: Double) -> String {
        guard isRunning(at: now) else { return variants[0] }
        return variants[variantIndex(forHash: GrowthBookHash.hash(seed: seed, value: subject))]
    }

    /// The first start or end after `now`, when the answer of `isRunning` next changes.
    func nextChange(after now: Double) -> Double? {
        [start, end].compactMap { $0 }.filter { $0 > now }.min()
    }
}
