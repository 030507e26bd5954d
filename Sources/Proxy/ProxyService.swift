import CLinux
import Analytics
import Config
import Credentials
import EventLoop
import Glibc
import Synchronization
import Upstream

/// Runs the proxy: loads the config, starts the loops, and handles signals on the calling
/// thread through a signalfd (SIGTERM/SIGINT graceful then forced, SIGHUP reload).
public enum ProxyService {
    /// The version printed by `--version` and logged at start.
    public static let version = "0.1.0"
    /// SIGHUP outcomes, for the metrics.
    private static let reloadCounts = ReloadCounts()

    private final class ReloadCounts: Sendable {
        let ok = Atomic<Int>(0)
        let failed = Atomic<Int>(0)
    }

    /// How long a graceful shutdown waits for in-flight requests: under Docker's 10 s stop timeout.
    public static let shutdownSeconds = 9.0

    /// Serves until stopped; returns the process exit code.
    public static func serve(configPath: String) -> Int32 {
        let configuration: ProxyConfiguration
        switch ConfigLoader.load(path: configPath) {
        case .success(let loaded): configuration = loaded
        case .failure(let errors):
            printErrors(errors, path: configPath)
            return 1
        }
        // Block the lifecycle signals before any thread exists so every thread inherits the mask.
        let signals = cl_signalfd_for_lifecycle()
        guard signals >= 0 else {
            Log.emit(.error, "startup_failed", ["error": .string("signalfd failed")])
            return 1
        }
        raiseDescriptorLimit(for: configuration.limits.maxConnections)
        UpstreamClient.globalInit()
        let server = HTTPServer(configuration: serverConfiguration(configuration))
        let runtime = ProxyRuntime(configuration: configuration)
        let tokens = TokenWatcher(configuration.provider)
        let initial = tokens.poll() ?? .empty
        let lifecycle = OAuthLifecycle(configuration)
        var analytics: AnalyticsService?
        if let settings = configuration.analytics {
            do {
                analytics = try AnalyticsService(configuration: settings, stateDirectory: configuration.stateDirectory)
            } catch {
                Log.emit(.error, "startup_failed", ["error": .string("analytics store: \(error)")])
                return 1
            }
        }
        var handlers: [ProxyHandler] = []
        let hub = MetricsHub()
        hub.setSources(openConnections: { [server] in server.openConnections },
                       reloads: { (reloadCounts.ok.load(ordering: .relaxed), reloadCounts.failed.load(ordering: .relaxed)) })
        do {
            let bound = try server.start { loop, index in
                let handler = ProxyHandler(runtime: runtime, loop: loop, loopIndex: index, hub: hub)
                handler.analytics = analytics
                handler.uploadsHere = index == 0
                handler.credentialsChanged(initial)
                handler.credentialManager = lifecycle?.manager(home: loop, http: handler.upstream)
                handlers.append(handler)
                lifecycle?.directory.add(loop: loop, handler: handler)
                return handler
            }
            lifecycle?.start()
            if let manager = handlers.first?.credentialManager { hub.setRefreshes(manager.refreshOutcomes) }
            if let analytics, let home = handlers.first {
                analytics.start(home: server.eventLoops[0], http: home.upstream, refresher: home.credentialManager)
                hub.setAnalytics(analytics.counters)
            }
            for address in bound { Log.emit(.info, "listening", ["address": .string(address.description)]) }
        } catch {
            Log.emit(.error, "startup_failed", ["error": .string("\(error)")])
            return 1
        }
        Log.emit(.info, "started", ["version": .string(version), "config": .string(configPath),
                                    "workers": .int(server.eventLoops.count), "routes": .int(configuration.routes.count)])
        return waitForSignals(signals, server: server, handlers: handlers, configPath: configPath, current: runtime, tokens: tokens,
                              lifecycle: lifecycle, analytics: analytics)
    }

    /// Raises the soft open-file limit to the hard one: each client connection and each upstream
    /// connection is a descriptor, and the default soft limit (1024) is below `maxConnections`.
    private static func raiseDescriptorLimit(for connections: Int) {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < limit.rlim_max else { return }
        limit.rlim_cur = limit.rlim_max
        _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        if Int(limit.rlim_cur) < connections * 2 + 64 {
            Log.emit(.warning, "descriptor_limit", ["limit": .int(Int(limit.rlim_cur)), "maxConnections": .int(connections)])
        }
    }

    /// Validates a config; prints every problem. Returns the exit code.
    public static func checkConfig(configPath: String) -> Int32 {
        switch ConfigLoader.load(path: configPath) {
        case .success(let configuration):
            print("\(configPath): ok (\(configuration.routes.count) routes)")
            // Not an error: the directory may be created before `serve` runs (a volume, tmpfiles.d).
            for warning in listenWarnings(configuration) { Log.writeStandardError("\(configPath): warning: \(warning)\n") }
            return 0
        case .failure(let errors):
            printErrors(errors, path: configPath)
            return 1
        }
    }

    /// What would stop a `unix:` listener from binding: a missing directory, or something
    /// other than a socket at its path.
    static func listenWarnings(_ configuration: ProxyConfiguration) -> [String] {
        var warnings: [String] = []
        for (index, address) in configuration.listen.enumerated() {
            guard case .unix(let path) = address else { continue }
            let directory = path.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
            var info = stat()
            if stat(directory.isEmpty ? "/" : directory, &info) != 0 || info.st_mode & S_IFMT != S_IFDIR {
                warnings.append("listen[\(index)]: the directory \(directory) of \(address) does not exist; serve cannot bind there")
            } else if lstat(path, &info) == 0 && info.st_mode & S_IFMT != S_IFSOCK {
                warnings.append("listen[\(index)]: \(path) exists and is not a socket; serve will refuse to replace it")
            }
        }
        return warnings
    }

    private static func printErrors(_ errors: ConfigErrors, path: String) {
        var text = "\(path): \(errors.errors.count) problem\(errors.errors.count == 1 ? "" : "s")\n"
        for error in errors.errors { text += "  \(error)\n" }
        Log.writeStandardError(text)
    }

    /// The server's settings from the proxy config.
    static func serverConfiguration(_ config: ProxyConfiguration) -> ServerConfiguration {
        var server = ServerConfiguration()
        server.addresses = config.listen.map { address in
            switch address {
            case .tcp(let host, let port): .tcp(host: host, port: port)
            case .unix(let path): .unix(path: path)
            }
        }
        server.workers = config.workers
        server.maxHeadBytes = config.limits.maxHeaderBytes
        server.maxBodyBytes = config.limits.maxBodyBytes
        server.maxConnections = config.limits.maxConnections
        server.headerTimeout = config.limits.headerTimeoutSeconds
        server.idleTimeout = config.limits.idleTimeoutSeconds
        return server
    }

    private static func waitForSignals(_ signals: CInt, server: HTTPServer, handlers: [ProxyHandler],
                                       configPath: String, current: ProxyRuntime, tokens: TokenWatcher,
                                       lifecycle: OAuthLifecycle?, analytics: AnalyticsService?) -> Int32 {
        var runtime = current
        var tokens = tokens
        var drainDeadline: NanoTime?
        while true {
            var pfd = pollfd(fd: signals, events: Int16(POLLIN), revents: 0)
            _ = poll(&pfd, 1, drainDeadline == nil ? 1000 : 50)
            if let snapshot = tokens.poll() { publish(snapshot, server: server, handlers: handlers) }
            while case let signal = cl_signalfd_read(signals), signal > 0 {
                switch signal {
                case SIGHUP:
                    let previous = runtime
                    runtime = reload(configPath: configPath, server: server, handlers: handlers, current: runtime)
                    if runtime !== previous, runtime.configuration.provider != previous.configuration.provider {
                        reloadProvider(from: previous, to: runtime, tokens: &tokens, lifecycle: lifecycle, server: server, handlers: handlers)
                    }
                default:
                    if drainDeadline != nil {
                        Log.emit(.warning, "forced_exit", ["signal": .int(Int(signal)), "open": .int(server.openConnections)])
                        _exit(1)
                    }
                    Log.emit(.info, "shutting_down", ["signal": .int(Int(signal)), "open": .int(server.openConnections),
                                                      "deadlineSeconds": .double(shutdownSeconds)])
                    drainDeadline = NanoTime.now().adding(seconds: shutdownSeconds)
                    server.beginShutdown()
                }
            }
            if let deadline = drainDeadline, server.openConnections == 0 || NanoTime.now() >= deadline {
                let open = server.openConnections
                if let analytics {
                    // One last upload within what is left of the deadline; the rest stays on disk.
                    let left = max(0.5, deadline.seconds(since: NanoTime.now()))
                    let uploaded = analytics.finalUpload(within: left, home: server.eventLoops[0])
                    Log.emit(.info, "analytics_final_upload", ["completed": .bool(uploaded)])
                }
                server.stop()
                analytics?.shutdown()
                lifecycle?.worker.shutdown()  // pending token-store writes reach the disk
                Log.emit(.info, "stopped", ["closedInFlight": .int(open)])
                return 0
            }
        }
    }

    /// A reloaded provider: static tokens switch at once; an OAuth provider change needs a restart
    /// (the login, its store and the endpoints belong to the running lifecycle).
    private static func reloadProvider(from old: ProxyRuntime, to new: ProxyRuntime, tokens: inout TokenWatcher,
                                       lifecycle: OAuthLifecycle?, server: HTTPServer, handlers: [ProxyHandler]) {
        let grant = new.configuration.provider?.grant
        if lifecycle == nil && (grant == .staticTokens || grant == nil) {
            tokens = TokenWatcher(new.configuration.provider)
            publish(tokens.poll() ?? .empty, server: server, handlers: handlers)
        } else {
            Log.emit(.warning, "config_reload_partial", ["message": .string("provider changes of an OAuth grant take effect at the next start")])
        }
    }

    /// Hands a new token snapshot to every loop; requests after it carry the new tokens.
    private static func publish(_ snapshot: CredentialSnapshot, server: HTTPServer, handlers: [ProxyHandler]) {
        Log.emit(.info, "credentials_changed", ["generation": .int(Int(snapshot.generation))])
        for (loop, handler) in zip(server.eventLoops, handlers) {
            nonisolated(unsafe) let handler = handler
            loop.execute { handler.credentialsChanged(snapshot) }
        }
    }

    /// SIGHUP: a valid config replaces the runtime on every loop for new requests; an invalid one is logged and ignored.
    private static func reload(configPath: String, server: HTTPServer, handlers: [ProxyHandler], current: ProxyRuntime) -> ProxyRuntime {
        switch ConfigLoader.load(path: configPath) {
        case .failure(let errors):
            reloadCounts.failed.add(1, ordering: .relaxed)
            Log.emit(.error, "config_reload_failed", ["config": .string(configPath), "errors": .string(errors.description)])
            return current
        case .success(let configuration):
            let next = ProxyRuntime(configuration: configuration, mocks: current.mocks)
            for (loop, handler) in zip(server.eventLoops, handlers) {
                nonisolated(unsafe) let handler = handler
                loop.execute { handler.runtime = next }
            }
            let old = current.configuration
            if old.listen != configuration.listen || old.workers != configuration.workers || old.limits != configuration.limits {
                Log.emit(.warning, "config_reload_partial", ["message": .string("listen, workers and limits take effect at the next start")])
            }
            reloadCounts.ok.add(1, ordering: .relaxed)
            Log.emit(.info, "config_reloaded", ["config": .string(configPath), "routes": .int(configuration.routes.count)])
            return next
        }
    }
}
