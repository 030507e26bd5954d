import Config
import Credentials
import EventLoop
import Upstream

/// Wiring of the OAuth grants (authorization_code, client_credentials): the token store read at
/// start, the blocking worker for its writes, the manager on loop 0, and the fan-out of its
/// snapshots to every loop's handler.
final class OAuthLifecycle {
    let provider: ProviderConfiguration
    let store: TokenStore
    let worker = BlockingWorker(name: "token-store")
    let directory = LoopDirectory()
    private var stored: TokenSet?
    private var manager: CredentialManager?

    /// Nil for no provider or the static grant.
    init?(_ configuration: ProxyConfiguration) {
        guard let provider = configuration.provider, provider.grant != .staticTokens else { return nil }
        self.provider = provider
        store = TokenStore(directory: configuration.stateDirectory)
        switch store.load() {
        case .none: stored = nil
        case .loaded(let tokens): stored = tokens
        case .corrupt(let movedTo):
            Log.emit(.warning, "token_store_corrupt", ["movedTo": .string(movedTo), "message": .string("treated as logged out")])
        }
    }

    /// The manager, created on the first (home) loop and shared by the others.
    func manager(home loop: EventLoop, http: UpstreamClient) -> CredentialManager {
        if let manager { return manager }
        let directory = self.directory
        // The secret was checked when the config loaded; resolving again picks up a rotated file.
        let secret = try? provider.clientSecret?.resolve()
        let created = CredentialManager(provider: provider, loop: loop, http: http, store: store, worker: worker,
                                        clientSecret: secret, publish: { snapshot in directory.publish(snapshot) })
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
        return CredentialSnapshot(generation: 0, accessToken: stored.accessToken, idToken: stored.idToken,
                                  tokenType: stored.tokenType, status: status)
    }

    /// Starts the lifecycle with the stored tokens (after every loop has its handler).
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

    /// Hands `snapshot` to each loop's handler, on that loop.
    func publish(_ snapshot: CredentialSnapshot) {
        for (loop, handler) in members {
            let handler = LoopBound(handler, on: loop)
            loop.execute { handler.value.credentialsChanged(snapshot) }
        }
    }
}
