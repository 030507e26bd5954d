/// The analytics sidecar: keypath root, upload endpoint and queue limits.
public struct AnalyticsConfiguration: Sendable, Equatable {
    /// Dot-path prefix added to every key ("pennmobile"). Required.
    public var root: String
    /// Where batches are POSTed. Required.
    public var endpoint: UpstreamURL
    /// Token sent with uploads. Default `.accessToken`.
    public var credential: CredentialKind
    /// The provider whose token uploads carry; set by the decoder when a credential is sent
    /// (the only provider when there is one). Default nil.
    public var provider: String?
    /// Product number in every upload body. Default 1.
    public var product: Int
    /// Seconds between uploads. Default 30.
    public var pushIntervalSeconds: Double
    /// Seconds after which stored values are pruned. Default 604800 (7 days).
    public var expireIntervalSeconds: Double
    /// Seconds within which a repeated key is dropped. Default 5.
    public var bufferIntervalSeconds: Double
    /// Most values in one upload, 1...10000. Default 500.
    public var maxBatch: Int
    /// Most values kept on disk; the oldest are dropped beyond it. Default 100000.
    public var maxStoredEvents: Int
    /// Whether stored values are uploaded; false keeps accepting and storing them (the `test`
    /// profile's default). Default true.
    public var uploads: Bool = true
    /// Longest key accepted, in UTF-8 bytes after the root is prefixed; longer ones get 400. Default 256.
    public var maxKeyBytes: Int
    /// Longest value accepted, in UTF-8 bytes; longer ones get 413. Default 1024.
    public var maxValueBytes: Int
    /// Most events in one request; more get 413. Default 1000.
    public var maxEventsPerRequest: Int
    /// Most bytes of keys, values and subjects kept on disk; the oldest are dropped beyond it. Default 67108864 (64 MiB).
    public var maxStoredBytes: Int
    /// Largest upload body in bytes (at least one value is always sent). Default 1048576 (1 MiB).
    public var maxUploadBytes: Int

    /// Analytics settings with the documented defaults unless given.
    public init(
        root: String, endpoint: UpstreamURL, credential: CredentialKind = .accessToken, product: Int = 1,
        pushIntervalSeconds: Double = 30, expireIntervalSeconds: Double = 604_800,
        bufferIntervalSeconds: Double = 5, maxBatch: Int = 500, maxStoredEvents: Int = 100_000,
        maxValueBytes: Int = 1024, maxEventsPerRequest: Int = 1000, maxStoredBytes: Int = 64 << 20,
        maxUploadBytes: Int = 1 << 20, maxKeyBytes: Int = 256
    ) {
        self.maxKeyBytes = maxKeyBytes
        self.maxValueBytes = maxValueBytes
        self.maxEventsPerRequest = maxEventsPerRequest
        self.maxStoredBytes = maxStoredBytes
        self.maxUploadBytes = maxUploadBytes
        self.root = root
        self.endpoint = endpoint
        self.credential = credential
        self.product = product
        self.pushIntervalSeconds = pushIntervalSeconds
        self.expireIntervalSeconds = expireIntervalSeconds
        self.bufferIntervalSeconds = bufferIntervalSeconds
        self.maxBatch = maxBatch
        self.maxStoredEvents = maxStoredEvents
    }
}
