import CLinux
import Analytics
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
package enum ProxyService {
    /// The version printed by `--version` and logged at start.
    package static let version = "0.1.0"
    /// SIGHUP outcomes, for the metrics.
    private static let reloadCounts = ReloadCounts()

    private final class ReloadCounts: Sendable {
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
    package static func serve(config location: ConfigLocation) -> Int32 {
        let configPath = location.path
        let configuration: ProxyConfiguration
        switch location.load() {
        case .success(let loaded): configuration = loaded
        case .failure(let errors):
            // The log stream stays JSON lines, one per problem, each readable on its own.
            for error in errors.errors {
                Log.emit(.error, "config_error", ["config": .string(configPath), "path": .string(error.path),
                                                  "message": .string(error.message)])
            }
            Log.emit(.error, "startup_failed", ["config": .string(configPath), "problems": .int(errors.errors.count),
                                                "hint": .string("platform-proxy check-config --config \(configPath)")])
            return 1
        }
        for warning in ConfigWarnings.of(configuration) {
            Log.emit(.warning, "config_warning", ["path": .string(warning.path), "message": .string(warning.message)])
        }
        // Before anything reads from it: a state directory others can write may hold their tokens.
        // Made first when missing, so nobody else can make it between the check and a first write.
        StateTrust.create(directory: configuration.stateDirectory)
        if let problem = StateTrust.check(directory: configuration.stateDirectory) {
            Log.emit(.error, "startup_failed", ["error": .string(problem.description), "path": .string(problem.path),
                                                "owner": .int(Int(problem.owner)), "mode": .string(problem.octalMode)])
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
        let loginChains = LoginChains(broadcast: { [directory = lifecycle?.directory] event in directory?.loginOutcome(event) })
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
        hub.profile = configuration.profile
        reloadCounts.status.withLock { $0.lastSuccessTime = UnixTime.now() }
        hub.setExperiments(experiments.counters)
        hub.setSources(openConnections: { [server] in server.openConnections },
                       reloads: { reloadCounts.status.withLock { $0 } })
        do {
            let bound = try server.start { loop, index in
                let handler = ProxyHandler(runtime: runtime.forLoop(), loop: loop, loopIndex: index, hub: hub)
                handler.analytics = analytics
                handler.upstream.ownListeners = ownListeners
                handler.experimentService = experiments
                handler.uploadsHere = index == 0
                handler.metricsListener = configuration.metricsListen.map { _ in configuration.listen.count }
                for (provider, snapshot) in initial { handler.credentialsChanged(snapshot, provider: provider) }
                handler.setManagers(lifecycle?.managers(home: loop, http: handler.upstream) ?? [:])
                handler.loginChains = loginChains
                handlers.append(handler)
                lifecycle?.directory.add(loop: loop, handler: handler)
                return handler
            }
            ownListeners.set(bound.compactMap { address in
                if case .tcp(let host, let port) = address { (host: host, port: port) } else { nil }
            })
            lifecycle?.start()
            if let home = handlers.first {
                hub.setRefreshes(configuration.providers.compactMap { named in
                    home.slot(named.name).manager.map { (named.name, $0.refreshOutcomes) }
                })
            }
            if let analytics, let home = handlers.first {
                analytics.start(home: server.eventLoops[0], http: home.upstream,
                                refresher: home.slot(home.analyticsProviderName).manager.map(ManagerUploadRefresher.init))
                hub.setAnalytics(analytics.counters)
            }
            for address in bound { Log.emit(.info, "listening", ["address": .string(address.description)]) }
        } catch {
            Log.emit(.error, "startup_failed", ["error": .string("\(error)")])
            return 1
        }
        Log.emit(.info, "started", ["version": .string(version), "config": .string(configPath), "configSource": .string(location.source),
                                    "workers": .int(server.eventLoops.count), "routes": .int(configuration.routes.count),
                                    "maxClients": .int(settings.maxConnections)])
        return waitForSignals(signals, server: server, handlers: handlers, location: location, current: runtime, tokens: tokens,
                              lifecycle: lifecycle, analytics: analytics, experiments: experiments)
    }

    /// Removes the temporaries a recording killed mid-write left in the routes' mock folders
    /// (a record-mode route, or one the mock switch may put in record mode), logged per folder.
    private static func removeMockTemporaries(_ configuration: ProxyConfiguration) {
        var seen: Set<String> = []
        for route in configuration.routes {
            guard let directory = route.mock?.directory, seen.insert(directory).inserted else { continue }
            let removed = MockTemporaries.removeStale(under: directory)
            guard !removed.isEmpty else { continue }
            Log.emit(.warning, "mock_temporaries_removed", ["directory": .string(directory), "count": .int(removed.count),
                                                            "message": .string("partial recordings left by an interrupted record mode")])
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
            Log.emit(.warning, "descriptor_limit", [
                "limit": .int(descriptors), "maxConnections": .int(connections),
                "clientsServed": .int(clientBudget(descriptors: descriptors)),
                "message": .string("the open-file limit cannot hold maxConnections clients and their upstream connections; "
                                   + "more clients than clientsServed get 503 (raise ulimit -n or lower limits.maxConnections)")])
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

    /// Validates a config and prints the report on stdout (so `> report.txt` keeps it): every
    /// problem with its JSON path, or "ok" and any warnings. Returns 1 on a problem, else 0.
    /// With `schemaOnly`, secret files and environment variables are not read. With a profile
    /// the merged config is checked; without one, the base and then every profile, each named.
    package static func checkConfig(config location: ConfigLocation, schemaOnly: Bool) -> Int32 {
        var text = location.source != "--config" ? "using \(location.description)\n" : ""
        var profiles: [String?] = [location.profile]
        if location.profile == nil { profiles += ConfigLoader.profileNames(path: location.path).map { $0 } }
        var failed = false
        for profile in profiles {
            var checked = location
            checked.profile = profile
            let label = location.path + (profile.map { " [profile \($0)]" } ?? "")
            let prefix = profile.map { "profile \($0): " } ?? ""
            switch checked.load(schemaOnly: schemaOnly) {
            case .success(let configuration):
                let routes = configuration.routes.count
                text += "\(label): ok (\(routes) route\(routes == 1 ? "" : "s")\(schemaOnly ? ", secrets not read" : ""))\n"
                for warning in ConfigWarnings.of(configuration) { text += "  warning: \(prefix)\(warning)\n" }
                // Not errors: the directory may be created before `serve` runs (a volume, tmpfiles.d).
                for warning in listenWarnings(configuration) { text += "  warning: \(prefix)\(warning)\n" }
                // Judged for the user running the check, who may not be the one `serve` runs as.
                if let problem = StateTrust.check(directory: configuration.stateDirectory) {
                    text += "  warning: \(prefix)stateDirectory: \(problem); serve run as uid \(geteuid()) will refuse to start\n"
                }
            case .failure(let errors):
                failed = true
                text += "\(label): \(errors.errors.count) problem\(errors.errors.count == 1 ? "" : "s")\n"
                for error in errors.errors { text += "  \(prefix)\(error)\n" }
            }
        }
        print(text, terminator: "")
        return failed ? 1 : 0
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

    private static func waitForSignals(_ signals: CInt, server: HTTPServer, handlers: [ProxyHandler],
                                       location: ConfigLocation, current: ProxyRuntime, tokens: TokenWatcher,
                                       lifecycle: OAuthLifecycle?, analytics: AnalyticsService?,
                                       experiments: ExperimentService) -> Int32 {
        var runtime = current
        var tokens = tokens
        var drainDeadline: NanoTime?
        let configPath = location.path
        let watcher = current.configuration.watchConfig ? ConfigWatcher(path: absolute(configPath)) : nil
        // Changes come in bursts (an editor's write and rename, a ConfigMap swap): look once they settle.
        var checkAt: NanoTime?
        let grace = current.configuration.shutdownGraceSeconds
        func reloadNow(_ trigger: String) {
            guard let next = reload(location: location, trigger: trigger, current: runtime, experiments: experiments) else { return }
            // The new tokens are read before anything is installed, and each loop takes the routes
            // and their tokens in one task: no request pairs a new route with the old token.
            let snapshots = next.configuration.providers == runtime.configuration.providers ? []
                : reloadProvider(from: runtime, to: next, tokens: &tokens, lifecycle: lifecycle)
            install(next, snapshots, server: server, handlers: handlers)
            runtime = next
        }
        while true {
            var pfds = [pollfd(fd: signals, events: Int16(POLLIN), revents: 0),
                        pollfd(fd: watcher?.fd ?? -1, events: Int16(POLLIN), revents: 0)]
            _ = poll(&pfds, 2, drainDeadline == nil ? (checkAt == nil ? 1000 : 100) : 50)
            for (provider, snapshot) in tokens.poll() { publish(snapshot, provider: provider, server: server, handlers: handlers) }
            if let watcher, watcher.drainEvents() || watcher.targetMoved() { checkAt = NanoTime.now().adding(seconds: 0.2) }
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
                        Log.emit(.warning, "forced_exit", ["signal": .int(Int(signal)), "open": .int(server.openConnections)])
                        _exit(1)
                    }
                    Log.emit(.info, "shutting_down", ["signal": .int(Int(signal)), "open": .int(server.openConnections),
                                                      "deadlineSeconds": .double(grace)])
                    drainDeadline = NanoTime.now().adding(seconds: grace)
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
                let stopped = server.stop(within: 2)
                if !stopped { Log.emit(.error, "forced_exit", ["reason": .string("an event loop did not stop within 2 s")]) }
                analytics?.shutdown()
                experiments.shutdown()  // pending state writes reach the disk
                lifecycle?.worker.shutdown()  // pending token-store writes reach the disk
                if !stopped { _exit(1) }
                Log.emit(.info, "stopped", ["closedInFlight": .int(open)])
                return 0
            }
        }
    }

    /// Reloaded providers: static tokens switch at once; a change of an OAuth provider (or of
    /// which providers exist) needs a restart (the login, its store and the endpoints belong to
    /// the running lifecycle).
    private static func reloadProvider(from old: ProxyRuntime, to new: ProxyRuntime, tokens: inout TokenWatcher,
                                       lifecycle: OAuthLifecycle?) -> [(provider: String, snapshot: CredentialSnapshot)] {
        let oauth = { (config: ProxyConfiguration) in config.providers.filter { $0.configuration.grant != .staticTokens } }
        if oauth(old.configuration) != oauth(new.configuration) {
            Log.emit(.warning, "config_reload_partial", ["message": .string("provider changes of an OAuth grant take effect at the next start")])
        }
        let before = tokens.names
        tokens = TokenWatcher(new.configuration.providers)
        var changed = Dictionary(uniqueKeysWithValues: tokens.poll().map { ($0.provider, $0.snapshot) })
        // A static provider that was removed (or became OAuth) has no tokens any more.
        for name in before where changed[name] == nil && !tokens.names.contains(name) && lifecycle?.members.contains(where: { $0.name == name }) != true {
            changed[name] = .empty
        }
        return changed.map { (provider: $0.key, snapshot: $0.value) }
    }

    /// `path` made absolute against the working directory (the watcher must not follow a later chdir).
    private static func absolute(_ path: String) -> String {
        if path.hasPrefix("/") { return path }
        guard let cwd = getcwd(nil, 0) else { return path }
        defer { free(cwd) }
        return String(cString: cwd) + "/" + path
    }

    /// Hands a provider's new token snapshot to every loop; requests after it carry the new tokens.
    private static func publish(_ snapshot: CredentialSnapshot, provider: String, server: HTTPServer, handlers: [ProxyHandler]) {
        Log.emit(.info, "credentials_changed", ["provider": .string(provider), "generation": .int(Int(snapshot.generation))])
        for (loop, handler) in zip(server.eventLoops, handlers) {
            nonisolated(unsafe) let handler = handler
            loop.execute { handler.credentialsChanged(snapshot, provider: provider) }
        }
    }

    /// Hands every loop the reloaded runtime and the providers' new token snapshots in one task.
    private static func install(_ next: ProxyRuntime, _ snapshots: [(provider: String, snapshot: CredentialSnapshot)],
                                server: HTTPServer, handlers: [ProxyHandler]) {
        for (provider, snapshot) in snapshots {
            Log.emit(.info, "credentials_changed", ["provider": .string(provider), "generation": .int(Int(snapshot.generation))])
        }
        for (loop, handler) in zip(server.eventLoops, handlers) {
            nonisolated(unsafe) let handler = handler
            let compiled = next.forLoop()
            loop.execute {
                handler.runtime = compiled
                for (provider, snapshot) in snapshots { handler.credentialsChanged(snapshot, provider: provider) }
            }
        }
    }

    /// SIGHUP: a valid config becomes the next runtime (for new requests once installed); an
    /// invalid one is logged and ignored (nil).
    private static func reload(location: ConfigLocation, trigger: String, current: ProxyRuntime,
                               experiments: ExperimentService) -> ProxyRuntime? {
        let configPath = location.path
        // The profile chosen at start is re-read from the file; switching profile needs a restart.
        switch location.load() {
        case .failure(let errors):
            reloadCounts.record(success: false, errors: errors.description)
            Log.emit(.error, "config_reload_failed", ["config": .string(configPath), "trigger": .string(trigger),
                                                      "errors": .string(errors.description)])
            return nil
        case .success(let configuration):
            // The installation id exists before any loop assigns with the new experiments.
            if !configuration.experiments.isEmpty, let error = experiments.prepare() {
                Log.emit(.error, "experiments_installation_id_unsaved", ["error": .string("\(error)")])
            }
            let next = ProxyRuntime(configuration: configuration, mocks: current.mocks)
            let old = current.configuration
            if old.listen != configuration.listen || old.workers != configuration.workers || old.limits != configuration.limits
                || old.metricsListen != configuration.metricsListen || old.shutdownGraceSeconds != configuration.shutdownGraceSeconds
                || old.watchConfig != configuration.watchConfig {
                Log.emit(.warning, "config_reload_partial", ["message": .string(
                    "listen, metricsListen, workers, limits, shutdownGraceSeconds and watchConfig take effect at the next start")])
            }
            reloadCounts.record(success: true)
            Log.emit(.info, "config_reloaded", ["config": .string(configPath), "trigger": .string(trigger),
                                                "routes": .int(configuration.routes.count)])
            return next
        }
    }
}
