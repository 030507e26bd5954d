import Config
import Credentials
import EventLoop
import Upstream

/// Wiring of the OAuth grants (authorization_code, client_credentials, journey) of every
/// configured provider: one `ProviderLifecycle` each (own token store file, own manager, own
/// refresher and backoff), one blocking worker for all store writes, and the fan-out of each
/// manager's snapshots to every loop's handler under the provider's name.
final class OAuthLifecycle {
    let worker = BlockingWorker(name: "token-store")
    let directory = LoopDirectory()
    /// The OAuth providers in config order (static ones have no lifecycle).
    let members: [ProviderLifecycle]

    /// Nil when no provider uses an OAuth grant.
    init?(_ configuration: ProxyConfiguration) {
        let members = configuration.providers.filter { $0.configuration.grant != .staticTokens }
            .map { ProviderLifecycle($0, stateDirectory: configuration.stateDirectory) }
        guard !members.isEmpty else { return nil }
        self.members = members
    }

    /// The managers by provider name, created on the first (home) loop and shared by the others.
    func managers(home loop: EventLoop, http: UpstreamClient) -> [String: CredentialManager] {
        var managers: [String: CredentialManager] = [:]
        for member in members {
            managers[member.name] = member.manager(home: loop, http: http, worker: worker, directory: directory)
        }
        return managers
    }

    /// Each provider's snapshot before its manager's first publish reaches the loops.
    var initialSnapshots: [String: CredentialSnapshot] {
        var snapshots: [String: CredentialSnapshot] = [:]
        for member in members { snapshots[member.name] = member.initialSnapshot }
        return snapshots
    }

    /// Starts every lifecycle with its stored tokens (after every loop has its handler).
    func start() { for member in members { member.start() } }
}

/// One OAuth provider: its token store read at start and its manager on the home loop.
final class ProviderLifecycle {
    let name: String
    let provider: ProviderConfiguration
    let store: TokenStore
    private var stored: TokenSet?
    private(set) var manager: CredentialManager?

    init(_ named: NamedProvider, stateDirectory: String) {
        name = named.name
        provider = named.configuration
        store = TokenStore(
            directory: stateDirectory, name: named.tokenFileName, journeySession: named.journeySessionFileName)
        switch store.load() {
        case .none: stored = nil
        case .loaded(let tokens): stored = tokens
        case .corrupt(let movedTo):
            Log.emit(
                .warning, "token_store_corrupt",
                [
                    "provider": .string(named.name), "movedTo": .string(movedTo),
                    "message": .string("treated as logged out"),
                ])
        }
    }

    func manager(home loop: EventLoop, http: UpstreamClient, worker: BlockingWorker, directory: LoopDirectory)
        -> CredentialManager
    {
        if let manager { return manager }
        let name = self.name
        // The secret was checked when the config loaded; resolving again picks up a rotated file.
        let secret = try? provider.clientSecret?.resolve()
        let created = CredentialManager(
            provider: provider, loop: loop, http: http, store: store, worker: worker,
            clientSecret: secret, name: name,
            publish: { snapshot in directory.publish(snapshot, provider: name) })
        created.onJourneyProgress { event in directory.journeyProgress(event) }
        manager = created
        return created
    }

    /// What every loop holds before the manager's first publish reaches it: the stored login,
    /// so the first requests after a restart are not gated while that message travels.
    /// Generation 0 is older than any the manager publishes, so the manager's state wins.
    var initialSnapshot: CredentialSnapshot {
        guard let stored else { return .empty }
        let status = AuthStatus(state: .loggedIn, expiresAt: stored.expiresAt, subject: stored.subject)
        return CredentialSnapshot(
            generation: 0, accessToken: stored.accessToken, idToken: stored.idToken,
            tokenType: stored.tokenType, status: status)
    }

    func start() { manager?.start(stored: stored) }
}

/// Every loop with its handler, filled before the loop threads start and read-only afterwards.
final class LoopDirectory: @unchecked Sendable {
    private var members: [(EventLoop, ProxyHandler)] = []

    func add(loop: EventLoop, handler: ProxyHandler) { members.append((loop, handler)) }

    /// Hands a journey progress event to each loop's handler, on that loop.
    func journeyProgress(_ event: [UInt8]) {
        for (loop, handler) in members {
            let handler = LoopBound(handler, on: loop)
            loop.execute { handler.value.journeyProgress(event) }
        }
    }

    /// Hands a finished phased login's outcome to each loop's handler, on that loop.
    func loginOutcome(_ event: [UInt8]) {
        for (loop, handler) in members {
            let handler = LoopBound(handler, on: loop)
            loop.execute { handler.value.loginOutcome(event) }
        }
    }

    /// Hands `provider`'s `snapshot` to each loop's handler, on that loop.
    func publish(_ snapshot: CredentialSnapshot, provider: String) {
        for (loop, handler) in members {
            let handler = LoopBound(handler, on: loop)
            loop.execute { handler.value.credentialsChanged(snapshot, provider: provider) }
        }
    }
}
