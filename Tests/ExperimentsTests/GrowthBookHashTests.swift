import Config
import Testing

@testable import Experiments

/// Vectors from GrowthBook's shared SDK test cases, `packages/sdk-js/test/cases.json`
/// (github.com/growthbook/growthbook, MIT License, Copyright (c) GrowthBook, Inc.): the
/// `hash` section's version-2 rows, bucket values of its experiment cases, and rows of its
/// `getBucketRange` section with coverage 1.
struct GrowthBookHashTests {
    static let hashV2: [(seed: String, value: String, expected: Double)] = [
        ("seed", "a", 0.0505),
        ("seed", "b", 0.2696),
        ("foo", "ab", 0.2575),
        ("foo", "def", 0.2019),
        ("89123klj", "8952klfjas09ujkasdf", 0.124),
        ("90850943850283058242805", "123", 0.7516),
        ("()**(%$##$%#$#", "___)((*\":&", 0.0128),
        // "Support passthrough variations" / "Support holdout groups" / sticky bucket cases.
        ("experiment", "1", 0.4413),
        ("holdout", "1", 0.8043),
        ("feature-exp", "d123", 0.6468),
        ("feature-exp", "i123", 0.9943),
    ]

    @Test("hash(seed, value, 2) matches GrowthBook's published vectors", arguments: hashV2)
    func vectors(seed: String, value: String, expected: Double) {
        #expect(GrowthBookHash.hash(seed: seed, value: value) == expected)
        #expect(GrowthBookHash.bucket(seed: seed, value: value) == Int((expected * 10000).rounded()))
    }

    @Test("FNV-1a 32 reference values (the FNV authors' test suite: \"\", \"a\", \"foobar\")")
    func fnv() {
        #expect(GrowthBookHash.fnv1a32("") == 0x811C_9DC5)
        #expect(GrowthBookHash.fnv1a32("a") == 0xE40C_292C)
        #expect(GrowthBookHash.fnv1a32("foobar") == 0xBF9C_F968)
    }

    static let ranges: [(weights: [Double], expected: [(Double, Double)])] = [
        ([1, 1], [(0, 0.5), (0.5, 1)]),
        ([1, 1, 1, 1], [(0, 0.25), (0.25, 0.5), (0.5, 0.75), (0.75, 1)]),
        ([0.4, 0.6], [(0, 0.4), (0.4, 1)]),
        ([0.2, 0.3, 0.5], [(0, 0.2), (0.2, 0.5), (0.5, 1)]),
    ]

    @Test(
        "bucket ranges are GrowthBook's getBucketRanges with coverage 1 (weights normalised first)", arguments: ranges)
    func bucketRanges(weights: [Double], expected: [(Double, Double)]) {
        for scale in [1.0, 100.0] {
            let plan = ExperimentPlan(
                ExperimentConfiguration(
                    name: "e",
                    variants: weights.enumerated().map { .init(name: "v\($0.offset)", weight: $0.element * scale) }))
            #expect(plan.ranges.count == expected.count)
            for (got, want) in zip(plan.ranges, expected) {
                #expect(abs(got.start - want.0) < 1e-12 && abs(got.end - want.1) < 1e-12)
            }
        }
    }

    @Test("the seed is the experiment name, or salt:name with a salt")
    func seed() {
        #expect(ExperimentPlan(.init(name: "onboarding", variants: [.init(name: "a", weight: 1)])).seed == "onboarding")
        #expect(
            ExperimentPlan(.init(name: "onboarding", variants: [.init(name: "a", weight: 1)], salt: "2026-11")).seed
                == "2026-11:onboarding")
    }
}
