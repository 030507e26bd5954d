import EventLoop
import Glibc

/// What the HTTP server needs to know; built from the proxy config by the caller.
public struct ServerConfiguration: Sendable {
    /// Addresses to listen on. Default `127.0.0.1:8080`.
    public var addresses: [BindAddress] = [.tcp(host: "127.0.0.1", port: 8080)]
    /// Event loop threads; 0 means one per CPU this process may use (`CPUBudget`). Default 0.
    public var workers: Int = 0
    /// Largest request head in bytes. Default 32768.
    public var maxHeadBytes: Int = 32768
    /// Most header fields in a request. Default 100.
    public var maxHeaderCount: Int = 100
    /// Largest request body in bytes. Default 104857600 (100 MiB).
    public var maxBodyBytes: Int = 104_857_600
    /// Most open client connections across all loops; more get 503 and are closed. Default 10000.
    public var maxConnections: Int = 10000
    /// Seconds a client has to send a whole head (slow-loris defence). Default 10.
    public var headerTimeout: Double = 10
    /// Seconds a keep-alive connection may sit idle, or a body or a write may stall. Default 60.
    public var idleTimeout: Double = 60

    /// Creates the default configuration.
    public init() {}

    /// The number of loops to run: `workers`, or the CPUs available when 0.
    public var resolvedWorkers: Int {
        if workers > 0 { return workers }
        return CPUBudget.available()
    }
}
