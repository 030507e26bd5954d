import Analytics
import CLinux
import Config
import Credentials
import EventLoop
import Experiments
import Glibc
import HTTPServer
import Synchronization
import Upstream

/// Runs the proxy: loads the config, starts the loops, and handles signals on the calling
/// thread through a signalfd (SIGTERM/SIGINT graceful then forced, SIGHUP reload).
public enum ProxyService {
    /// The version printed by `--version` and logged at start.
    public static let version = "0.1.0"
    /// SIGHUP outcomes, for the metrics.
    static let reloadCounts = ReloadCounts()

    final class ReloadCounts: Sendable {
        let status = Mutex(ReloadStatus())

        func record(success: Bool, errors: String? = nil) {
            status.withLock { status in
                if success { status.ok += 1; status.lastSuccessTime = UnixTime.now() } else { status.failed += 1 }
                status.lastSucceeded = success
                status.lastErrors = errors
            }
        }
    }

    /// Serves until stopped; returns the process exit code.
    public static func serve(config location: ConfigLocation) -> Int32 {
        let configPath = location.path
        let configuration: ProxyConfiguration
        switch location.load() {
        case .success(let loaded): configuration = loaded
        case .failure(let errors):
            // The log stream stays JSON lines, one per problem, each readable on its own.
            for error in errors.errors {
                Log.emit(
                    .error, "config_error",
                    [
                        "config": .string(configPath), "path": .string(error.path),
                        "message": .string(error.message),
                    ])
            }
            Log.emit(
                .error, "startup_failed",
                [
                    "config": .string(configPath), "problems": .int(errors.errors.count),
                    "hint": .string("platform-proxy check-config --config \(configPath)"),
                ])
            return 1
        }
        for warning in ConfigWarnings.of(configuration) {
            Log.emit(.warning, "config_warning", ["path": .string(warning.path), "message": .string(warning.message)])
        }
        // Before anything reads from it: a state directory others can write may hold their tokens.
        // Made first when missing, so nobody else can make it between the check and a first write.
        StateTrust.create(directory: configuration.stateDirectory)
        if let problem = StateTrust.check(directory: configuration.stateDirectory) {
            Log.emit(
                .error, "startup_failed",
                [
                    "error": .string(problem.description), "path": .string(problem.path),
                    "owner": .int(Int(problem.owner)), "mode": .string(problem.octalMode),
                ])
            return 1
        }
        // Block the lifecycle signals before any thread exists so every thread inherits the mask.
        let signals = cl_signalfd_for_lifecycle()
        guard signals >= 0 else {
            Log.emit(.error, "startup_failed", ["error": .string("signalfd failed")])
            return 1
        }
        let descriptors = raiseDescriptorLimit(for: configuration.limits.maxConnections)
        UpstreamClient.globalInit()
        var settings = serverConfiguration(configuration)
        settings.maxConnections = min(settings.maxConnections, clientBudget(descriptors: descriptors))
        let server = HTTPServer(configuration: settings)
        // The control plane's runtime (a reload is compared with it); each loop compiles its own.
        let runtime = ProxyRuntime(configuration: configuration)
        let tokens = TokenWatcher(configuration.providers)
        let lifecycle = OAuthLifecycle(configuration)
        var initial = lifecycle?.initialSnapshots ?? [:]
        for (provider, snapshot) in tokens.poll() { initial[provider] = snapshot }
        let loginChains = LoginChains(broadcast: { [directory = lifecycle?.directory] event in
            directory?.loginOutcome(event)
        })
        var analytics: AnalyticsService?
        if let settings = configuration.analytics {
            do {
                analytics = try AnalyticsService(configuration: settings, stateDirectory: configuration.stateDirectory)
            } catch {
                Log.emit(.error, "startup_failed", ["error": .string("analytics store: \(error)")])
                return 1
            }
        }
        removeMockTemporaries(configuration)
        let experiments = ExperimentService(stateDirectory: configuration.stateDirectory)
        if !configuration.experiments.isEmpty, let error = experiments.prepare() {
            Log.emit(.error, "startup_failed", ["error": .string("experiments installation id: \(error)")])
            return 1
        }
        var handlers: [ProxyHandler] = []
        // Filled once the listeners are bound: no hop connects back to one of them.
        let ownListeners = OwnListeners()
        let hub = MetricsHub()
        let tunnels = TunnelAdmission(
            limits: configuration.limits, shutdownGrace: configuration.shutdownGraceSeconds)
        hub.profile = configuration.profile
        reloadCounts.status.withLock { $0.lastSuccessTime = UnixTime.now() }
        hub.setExperiments(experiments.counters)
        hub.setSources(
            openConnections: { [server] in server.openConnections },
            reloads: { reloadCounts.status.withLock { $0 } })
        do {
            let bound = try server.start { loop, index in
                let upstream = UpstreamClient(loop: loop)
                upstream.ownListeners = ownListeners
                var parameters = ProxyHandlerParameters(
                    runtime: runtime.forLoop(), loop: loop, loopIndex: index, hub: hub,
                    upstream: upstream, loginChains: loginChains)
                parameters.managers = lifecycle?.managers(home: loop, http: upstream) ?? [:]
                parameters.initialSnapshots = initial
                parameters.analytics = analytics
                parameters.experiments = experiments
                parameters.metricsListener = configuration.metricsListen.map { _ in configuration.listen.count }
                parameters.tunnelAdmission = tunnels
                let handler = ProxyHandler(parameters)
                handlers.append(handler)
                lifecycle?.directory.add(loop: loop, handler: handler)
                return handler
            }
            ownListeners.set(
                bound.compactMap { address in
                    if case .tcp(let host, let port) = address { (host: host, port: port) } else { nil }
                })
            lifecycle?.start()
            if let home = handlers.first {
                hub.setRefreshes(
                    configuration.providers.compactMap { named in
                        home.slot(named.name).manager.map { (named.name, $0.refreshOutcomes) }
                    })
            }
            if let analytics, let home = handlers.first {
                analytics.start(
                    home: server.eventLoops[0], http: home.upstream,
                    refresher: home.slot(home.analyticsProviderName).manager.map(ManagerUploadRefresher.init))
                hub.setAnalytics(analytics.counters)
            }
            for address in bound { Log.emit(.info, "listening", ["address": .string(address.description)]) }
        } catch {
            Log.emit(.error, "startup_failed", ["error": .string("\(error)")])
            return 1
        }
        Log.emit(
            .info, "started",
            [
                "version": .string(version), "config": .string(configPath), "configSource": .string(location.source),
                "workers": .int(server.eventLoops.count), "routes": .int(configuration.routes.count),
                "maxClients": .int(settings.maxConnections),
            ])
        return waitForSignals(
            signals, server: server, tunnels: tunnels, handlers: handlers, location: location, current: runtime,
            tokens: tokens, lifecycle: lifecycle, analytics: analytics, experiments: experiments)
    }

    /// Removes the temporaries a recording killed mid-write left in the routes' mock folders
    /// (a record-mode route, or one the mock switch may put in record mode), logged per folder.
    private static func removeMockTemporaries(_ configuration: ProxyConfiguration) {
        var seen: Set<String> = []
        for route in configuration.routes {
            guard let directory = route.mock?.directory, seen.insert(directory).inserted else { continue }
            let removed = MockTemporaries.removeStale(under: directory)
            guard !removed.isEmpty else { continue }
            Log.emit(
                .warning, "mock_temporaries_removed",
                [
                    "directory": .string(directory), "count": .int(removed.count),
                    "message": .string("partial recordings left by an interrupted record mode"),
                ])
        }
    }

    /// Raises the soft open-file limit to the hard one (each client and each upstream connection
    /// is a descriptor, and the usual soft limit, 1024, is below `maxConnections`); returns the
    /// limit in force. Warns once when it cannot hold `maxConnections` clients with their upstreams.
    private static func raiseDescriptorLimit(for connections: Int) -> Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 1024 }
        if limit.rlim_cur < limit.rlim_max {
            limit.rlim_cur = limit.rlim_max
            _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
            _ = getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        }
        let descriptors = Int(clamping: limit.rlim_cur)
        // A budget within 10 % of maxConnections is no news (a hard limit of 20000 against the
        // default 10000 clients, say); the budget is in the start line either way.
        if clientBudget(descriptors: descriptors) < connections * 9 / 10 {
            Log.emit(
                .warning, "descriptor_limit",
                [
                    "limit": .int(descriptors), "maxConnections": .int(connections),
                    "clientsServed": .int(clientBudget(descriptors: descriptors)),
                    "message": .string(
                        "the open-file limit cannot hold maxConnections clients and their upstream connections; "
                            + "more clients than clientsServed get 503 (raise ulimit -n or lower limits.maxConnections)"
                    ),
                ])
        }
        return descriptors
    }

    /// Descriptors kept out of the client budget: listeners, epoll, timers, log and state files, the IdP.
    static let descriptorReserve = 64

    /// Clients served at once within `descriptors`: each may need an upstream connection as well,
    /// so accepting stops (503) before the last descriptors are gone, as nginx's worker_connections do.
    static func clientBudget(descriptors: Int) -> Int {
        max(1, (descriptors - descriptorReserve) / 2)
    }

    /// The server's settings from the proxy config.
    static func serverConfiguration(_ config: ProxyConfiguration) -> ServerConfiguration {
        var server = ServerConfiguration()
        server.addresses = (config.listen + (config.metricsListen.map { [$0] } ?? [])).map { address in
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

    private static func waitForSignals(
        _ signals: CInt, server: HTTPServer, tunnels: TunnelAdmission, handlers: [ProxyHandler],
        location: ConfigLocation, current: ProxyRuntime, tokens: TokenWatcher,
        lifecycle: OAuthLifecycle?, analytics: AnalyticsService?,
        experiments: ExperimentService
    ) -> Int32 {
        var runtime = current
        var tokens = tokens
        var drainDeadline: NanoTime?
        let configPath = location.path
        let watcher = current.configuration.watchConfig ? ConfigWatcher(path: absolute(configPath)) : nil
        // Changes come in bursts (an editor's write and rename, a ConfigMap swap): look once they settle.
        var checkAt: NanoTime?
        let grace = current.configuration.shutdownGraceSeconds
        func reloadNow(_ trigger: String) {
            guard let next = reload(location: location, trigger: trigger, current: runtime, experiments: experiments)
            else { return }
            // The new tokens are read before anything is installed, and each loop takes the routes
            // and their tokens in one task: no request pairs a new route with the old token.
            let snapshots =
                next.configuration.providers == runtime.configuration.providers
                ? []
                : reloadProvider(from: runtime, to: next, tokens: &tokens, lifecycle: lifecycle)
            let path = location.path, routes = next.configuration.routes.count
            install(next, snapshots, server: server, handlers: handlers) {
                Log.emit(
                    .info, "config_reloaded",
                    ["config": .string(path), "trigger": .string(trigger), "routes": .int(routes)])
            }
            runtime = next
        }
        while true {
            var pfds = [
                pollfd(fd: signals, events: Int16(POLLIN), revents: 0),
                pollfd(fd: watcher?.fd ?? -1, events: Int16(POLLIN), revents: 0),
            ]
            _ = poll(&pfds, 2, drainDeadline == nil ? (checkAt == nil ? 1000 : 100) : 50)
            for (provider, snapshot) in tokens.poll() {
                publish(snapshot, provider: provider, server: server, handlers: handlers)
            }
            if let watcher, watcher.drainEvents() || watcher.targetMoved() {
                checkAt = NanoTime.now().adding(seconds: 0.2)
            }
            if let due = checkAt, NanoTime.now() >= due, drainDeadline == nil {
                checkAt = nil
                if watcher?.contentChanged() == true { reloadNow("file_changed") }
            }
            while case let signal = cl_signalfd_read(signals), signal > 0 {
                switch signal {
                case SIGHUP:
                    reloadNow("sighup")
                    // A provider may have moved its endpoints: its discovery document is read again.
                    for member in lifecycle?.members ?? [] { member.manager?.rediscover(trigger: "sighup") }
                    watcher?.noteReloaded()
                default:
                    if drainDeadline != nil {
                        Log.emit(
                            .warning, "forced_exit",
                            ["signal": .int(Int(signal)), "open": .int(server.openConnections)])
                        _exit(1)
                    }
                    Log.emit(
                        .info, "shutting_down",
                        [
                            "signal": .int(Int(signal)), "open": .int(server.openConnections),
                            "deadlineSeconds": .double(grace),
                        ])
                    drainDeadline = NanoTime.now().adding(seconds: grace)
                    server.beginShutdown()
                }
            }
            // Tunnels are no client connections once open: they are waited for too (each says
            // goodbye to its client within the grace).
            if let deadline = drainDeadline,
                (server.openConnections == 0 && tunnels.open == 0) || NanoTime.now() >= deadline
            {
                let open = server.openConnections
                if let analytics {
                    // One last upload within what is left of the deadline; the rest stays on disk.
                    let left = max(0.5, deadline.seconds(since: NanoTime.now()))
                    let uploaded = analytics.finalUpload(within: left, home: server.eventLoops[0])
                    Log.emit(.info, "analytics_final_upload", ["completed": .bool(uploaded)])
                }
                let stopped = server.stop(within: 2)
                if !stopped {
                    Log.emit(.error, "forced_exit", ["reason": .string("an event loop did not stop within 2 s")])
                }
                analytics?.shutdown()
                experiments.shutdown()  // pending state writes reach the disk
                lifecycle?.worker.shutdown()  // pending token-store writes reach the disk
                if !stopped { _exit(1) }
                Log.emit(.info, "stopped", ["closedInFlight": .int(open)])
                return 0
            }
        }
    }
}
