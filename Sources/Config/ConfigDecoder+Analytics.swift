import JSON

extension ConfigDecoder {
    static let analyticsKeys = [
        "root", "endpoint", "credential", "provider", "product", "pushIntervalSeconds", "expireIntervalSeconds",
        "bufferIntervalSeconds", "maxBatch", "maxStoredEvents", "uploads",
        "maxKeyBytes", "maxValueBytes", "maxEventsPerRequest", "maxStoredBytes", "maxUploadBytes",
    ]

    /// Keys over this many bytes are refused by the analytics API, so the root must leave room.
    static let maxAnalyticsRootBytes = 128

    /// The analytics block; nil when its root or endpoint is missing or invalid (reported).
    func analytics(_ object: ObjectReader) -> AnalyticsConfiguration? {
        let root = object.read("root", required: true, analyticsRoot)
        let endpoint = object.url("endpoint", required: true)
        let credential: CredentialKind = object.choice("credential") ?? .accessToken
        let product = object.integer("product", in: 0...Int.max) ?? 1
        let push = object.seconds("pushIntervalSeconds", positive: true) ?? 30
        let expire = object.seconds("expireIntervalSeconds", positive: true) ?? 604_800
        let buffer = object.seconds("bufferIntervalSeconds") ?? 5
        let batch = object.integer("maxBatch", in: 1...10000) ?? 500
        let stored = object.integer("maxStoredEvents", in: 1...Int.max) ?? 100_000
        let uploads = object.bool("uploads") ?? true
        let keyBytes = object.integer("maxKeyBytes", in: 2 * ConfigDecoder.maxAnalyticsRootBytes...4096) ?? 256
        let valueBytes = object.integer("maxValueBytes", in: 1...(1 << 20)) ?? 1024
        let events = object.integer("maxEventsPerRequest", in: 1...10_000) ?? 1000
        let storedBytes = object.integer("maxStoredBytes", in: (1 << 20)...Int.max) ?? 64 << 20
        let uploadBytes = object.integer("maxUploadBytes", in: 1024...(64 << 20)) ?? 1 << 20
        guard let root, let endpoint else { return nil }
        var analytics = AnalyticsConfiguration(
            root: root, endpoint: endpoint, credential: credential, product: product, pushIntervalSeconds: push,
            expireIntervalSeconds: expire, bufferIntervalSeconds: buffer, maxBatch: batch, maxStoredEvents: stored,
            maxValueBytes: valueBytes, maxEventsPerRequest: events, maxStoredBytes: storedBytes,
            maxUploadBytes: uploadBytes, maxKeyBytes: keyBytes)
        analytics.uploads = uploads
        analytics.provider = object.read("provider", providerName)
        return analytics
    }

    private func analyticsRoot(_ value: JSONValue, at path: String) -> String? {
        guard let root = string(value, at: path) else { return nil }
        if root.utf8.contains(where: { $0 <= 0x20 || $0 == 0x7F }) {
            return failure(path, "must not contain spaces or control characters")
        }
        if root.split(separator: ".", omittingEmptySubsequences: false).contains(where: \.isEmpty) {
            return failure(path, "must not have empty segments (a leading, trailing or doubled '.')")
        }
        if root.utf8.count > ConfigDecoder.maxAnalyticsRootBytes {
            return failure(path, "must be at most \(ConfigDecoder.maxAnalyticsRootBytes) bytes")
        }
        return root
    }
}
