/// Size, count and time limits that protect the proxy from slow or oversized clients.
public struct LimitsConfiguration: Sendable, Equatable {
    /// Largest request head (request line plus headers) in bytes; larger gets 431. Default 32768.
    public var maxHeaderBytes: Int
    /// Largest request body in bytes; larger gets 413. Default 104857600 (100 MiB).
    public var maxBodyBytes: Int
    /// Bodies up to this many bytes are buffered so a 401 can be retried. Default 1048576 (1 MiB).
    public var retryBodyBytes: Int
    /// Most client connections open at once, across all workers. Default 10000.
    public var maxConnections: Int
    /// Seconds a client may take to send a complete request head. Default 10.
    public var headerTimeoutSeconds: Double
    /// Seconds a keep-alive connection may sit idle between requests. Default 60.
    public var idleTimeoutSeconds: Double
    /// Most tunnels (upgraded connections: WebSockets) open at once, across all workers; 0 refuses
    /// every upgrade. Default 4096.
    public var maxTunnels: Int = 4096
    /// Most tunnels open at once from one client address, per worker. Default 1024.
    public var maxTunnelsPerClient: Int = 1024

    /// Limits with the documented defaults unless given.
    public init(
        maxHeaderBytes: Int = 32768, maxBodyBytes: Int = 104_857_600, retryBodyBytes: Int = 1_048_576,
        maxConnections: Int = 10000, headerTimeoutSeconds: Double = 10, idleTimeoutSeconds: Double = 60
    ) {
        self.maxHeaderBytes = maxHeaderBytes
        self.maxBodyBytes = maxBodyBytes
        self.retryBodyBytes = retryBodyBytes
        self.maxConnections = maxConnections
        self.headerTimeoutSeconds = headerTimeoutSeconds
        self.idleTimeoutSeconds = idleTimeoutSeconds
    }
}
