import Config
import Credentials
import EventLoop
import Experiments
import Glibc
import HTTPServer
import Synchronization

/// A reload (SIGHUP or a watched file change): the new runtime and tokens, handed to every loop.
extension ProxyService {
    /// Reloaded providers: static tokens switch at once; a change of an OAuth provider (or of
    /// which providers exist) needs a restart (the login, its store and the endpoints belong to
    /// the running lifecycle).
    static func reloadProvider(
        from old: ProxyRuntime, to new: ProxyRuntime, tokens: inout TokenWatcher,
        lifecycle: OAuthLifecycle?
    ) -> [(provider: String, snapshot: CredentialSnapshot)] {
        let oauth = { (config: ProxyConfiguration) in
            config.providers.filter { $0.configuration.grant != .staticTokens }
        }
        if oauth(old.configuration) != oauth(new.configuration) {
            Log.emit(
                .warning, "config_reload_partial",
                ["message": .string("provider changes of an OAuth grant take effect at the next start")])
        }
        let before = tokens.names
        tokens = TokenWatcher(new.configuration.providers)
        var changed = Dictionary(uniqueKeysWithValues: tokens.poll().map { ($0.provider, $0.snapshot) })
        // A static provider that was removed (or became OAuth) has no tokens any more.
        for name in before
        where changed[name] == nil && !tokens.names.contains(name)
            && lifecycle?.members.contains(where: { $0.name == name }) != true
        {
            changed[name] = .empty
        }
        return changed.map { (provider: $0.key, snapshot: $0.value) }
    }

    /// `path` made absolute against the working directory (the watcher must not follow a later chdir).
    static func absolute(_ path: String) -> String {
        if path.hasPrefix("/") { return path }
        guard let cwd = getcwd(nil, 0) else { return path }
        defer { free(cwd) }
        return String(cString: cwd) + "/" + path
    }

    /// Hands a provider's new token snapshot to every loop; requests after it carry the new tokens.
    static func publish(_ snapshot: CredentialSnapshot, provider: String, server: HTTPServer, handlers: [ProxyHandler])
    {
        Log.emit(
            .info, "credentials_changed", ["provider": .string(provider), "generation": .int(Int(snapshot.generation))])
        for (loop, handler) in zip(server.eventLoops, handlers) {
            nonisolated(unsafe) let handler = handler
            loop.execute { handler.credentialsChanged(snapshot, provider: provider) }
        }
    }

    /// Hands every loop the reloaded runtime and the providers' new token snapshots in one task;
    /// `installed` runs once the last loop has them (so whoever reads the `config_reloaded` line it
    /// logs finds every new request on the new routes).
    static func install(
        _ next: ProxyRuntime, _ snapshots: [(provider: String, snapshot: CredentialSnapshot)],
        server: HTTPServer, handlers: [ProxyHandler], installed: @escaping @Sendable () -> Void
    ) {
        let remaining = Countdown(server.eventLoops.count)
        for (provider, snapshot) in snapshots {
            Log.emit(
                .info, "credentials_changed",
                ["provider": .string(provider), "generation": .int(Int(snapshot.generation))])
        }
        for (loop, handler) in zip(server.eventLoops, handlers) {
            nonisolated(unsafe) let handler = handler
            let compiled = next.forLoop()
            loop.execute {
                handler.runtime = compiled
                for (provider, snapshot) in snapshots { handler.credentialsChanged(snapshot, provider: provider) }
                if remaining.tick() { installed() }
            }
        }
    }

    /// SIGHUP: a valid config becomes the next runtime (for new requests once installed; the
    /// caller logs `config_reloaded` when every loop has it); an invalid one is logged and ignored (nil).
    static func reload(
        location: ConfigLocation, trigger: String, current: ProxyRuntime,
        experiments: ExperimentService
    ) -> ProxyRuntime? {
        let configPath = location.path
        // The profile chosen at start is re-read from the file; switching profile needs a restart.
        switch location.load() {
        case .failure(let errors):
            reloadCounts.record(success: false, errors: errors.description)
            Log.emit(
                .error, "config_reload_failed",
                [
                    "config": .string(configPath), "trigger": .string(trigger),
                    "errors": .string(errors.description),
                ])
            return nil
        case .success(let configuration):
            // The installation id exists before any loop assigns with the new experiments.
            if !configuration.experiments.isEmpty, let error = experiments.prepare() {
                Log.emit(.error, "experiments_installation_id_unsaved", ["error": .string("\(error)")])
            }
            let next = ProxyRuntime(configuration: configuration, mocks: current.mocks)
            let old = current.configuration
            if old.listen != configuration.listen || old.workers != configuration.workers
                || old.limits != configuration.limits
                || old.metricsListen != configuration.metricsListen
                || old.shutdownGraceSeconds != configuration.shutdownGraceSeconds
                || old.watchConfig != configuration.watchConfig
            {
                Log.emit(
                    .warning, "config_reload_partial",
                    [
                        "message": .string(
                            "listen, metricsListen, workers, limits, shutdownGraceSeconds and watchConfig take effect at the next start"
                        )
                    ])
            }
            reloadCounts.record(success: true)
            return next
        }
    }
}

/// Counts the loops still to take a reload; the last one to tick is told so.
private final class Countdown: Sendable {
    private let remaining: Atomic<Int>
    init(_ count: Int) { remaining = Atomic(count) }
    /// One loop done; true for the last.
    func tick() -> Bool { remaining.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 }
}
