/// GrowthBook's bucketing hash, so a subject lands in the same bucket here as in GrowthBook's
/// SDKs for the same seed.
///
/// This is `hash(seed, value, 2)` of GrowthBook's JavaScript SDK
/// (`packages/sdk-js/src/util.ts`, MIT): `(hashFnv32a(hashFnv32a(seed + value) + "") % 10000) / 10000`,
/// where `hashFnv32a` is 32-bit FNV-1a over the string's UTF-16 code units (`charCodeAt`),
/// and `+ ""` is the decimal text of the first hash. Version 2 hashes twice because the
/// low digits of one FNV-1a round are biased for short, similar inputs (version 1).
/// ``bucket(seed:value:)`` returns the integer before the division: 0..<10000.
public enum GrowthBookHash {
    /// Buckets of the hash space.
    public static let buckets = 10_000

    /// FNV-1a, 32 bits, over UTF-16 code units: identical to byte-wise FNV-1a for ASCII.
    public static func fnv1a32(_ text: String) -> UInt32 {
        var hash: UInt32 = 0x811C_9DC5
        for unit in text.utf16 {
            hash ^= UInt32(unit)
            hash &*= 0x0100_0193
        }
        return hash
    }

    /// GrowthBook's version-2 bucket of `value` under `seed`, 0..<10000.
    public static func bucket(seed: String, value: String) -> Int {
        Int(fnv1a32(String(fnv1a32(seed + value))) % UInt32(buckets))
    }

    /// The same as GrowthBook returns it: a fraction in [0, 1) with four decimals.
    public static func hash(seed: String, value: String) -> Double {
        Double(bucket(seed: seed, value: value)) / Double(buckets)
    }
}
