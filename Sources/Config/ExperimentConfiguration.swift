/// One A/B experiment: its variants with relative weights and when it runs.
public struct ExperimentConfiguration: Sendable, Equatable {
    /// One arm of an experiment.
    public struct Variant: Sendable, Equatable {
        /// Letters, digits, `_` and `-`; unique within the experiment. Required.
        public var name: String
        /// Relative share of subjects, 0 or more (at least one variant's is above 0). Required.
        public var weight: Double

        /// A variant.
        public init(name: String, weight: Double) {
            self.name = name
            self.weight = weight
        }
    }

    /// The key under `experiments` (letters, digits, `_` and `-`). Required.
    public var name: String
    /// Variants in config order; the first is what everyone gets while the experiment is off. Required, at least one.
    public var variants: [Variant]
    /// Mixed into the hash seed; a new salt reshuffles everyone. Default "".
    public var salt: String
    /// False gives everyone the first variant. Default true.
    public var enabled: Bool
    /// Unix seconds from which subjects are split (inclusive); nil means always. Default nil.
    public var start: Double?
    /// Unix seconds at which the split ends (exclusive); nil means never. Default nil.
    public var end: Double?

    /// An experiment with the documented defaults unless given.
    public init(
        name: String, variants: [Variant], salt: String = "", enabled: Bool = true, start: Double? = nil,
        end: Double? = nil
    ) {
        self.name = name
        self.variants = variants
        self.salt = salt
        self.enabled = enabled
        self.start = start
        self.end = end
    }
}
