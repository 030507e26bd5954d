import Credentials
import Synchronization

/// Started browser logins, shared by every loop (the redirect back may land on any of them):
/// which provider each `state` belongs to, and the phased chains (`PhasedLogin`) in progress,
/// each bound to the `state` values of its requests. Entries expire with the login lifetime.
public final class LoginChains: Sendable {
    /// How long a started login (and its chain) stays valid, in seconds.
    static let lifetime = 600.0
    /// Most remembered states and chains (the oldest are dropped). A backstop: each provider
    /// refuses new logins past its own table of unfinished ones (`CredentialManager`), and a
    /// state is bound only once its provider accepted the login.
    static let capacity = 256

    private struct Binding {
        let provider: String
        let chain: UInt64?
        let expires: Double
    }

    private struct Chain {
        var login: PhasedLogin
        var expires: Double
    }

    private struct Table {
        var states: [String: Binding] = [:]
        var chains: [UInt64: Chain] = [:]
        var nextChain: UInt64 = 1
    }

    private let table = Mutex(Table())
    /// Hands a finished chain's outcome to every loop's auth event streams.
    let broadcast: @Sendable ([UInt8]) -> Void

    /// An empty table; `broadcast` reaches every loop (nothing by default).
    public init(broadcast: @escaping @Sendable ([UInt8]) -> Void = { _ in }) { self.broadcast = broadcast }

    /// Starts a chain over `providers`; returns its id and the first action.
    func startChain(_ providers: [String], now: Double) -> (id: UInt64, action: PhasedLogin.Action) {
        table.withLock { table in
            prune(&table, now: now)
            let id = table.nextChain
            table.nextChain += 1
            var login = PhasedLogin(providers: providers)
            let action = login.start()
            table.chains[id] = Chain(login: login, expires: now + Self.lifetime)
            return (id, action)
        }
    }

    /// Remembers that `state` is `provider`'s login, part of `chain` when given (which then
    /// lives as long as this state: a later step may start just before the chain's ten minutes end).
    func bind(state: String, provider: String, chain: UInt64?, now: Double) {
        table.withLock { table in
            prune(&table, now: now)
            table.states[state] = Binding(provider: provider, chain: chain, expires: now + Self.lifetime)
            if let chain { table.chains[chain]?.expires = now + Self.lifetime }
        }
    }

    /// The provider and chain `state` was bound to (forgotten: a state is used once).
    func take(state: String, now: Double) -> (provider: String, chain: UInt64?)? {
        table.withLock { table in
            guard let binding = table.states.removeValue(forKey: state), binding.expires > now else { return nil }
            return (binding.provider, binding.chain)
        }
    }

    /// Feeds `chain` the outcome of `provider`'s step; `.ignore` when the chain is unknown or elsewhere.
    func completed(chain: UInt64, provider: String, _ outcome: PhasedLogin.Outcome) -> PhasedLogin.Action {
        table.withLock { table in
            guard var entry = table.chains[chain] else { return .ignore }
            let action = entry.login.completed(provider, outcome)
            if case .finish = action { table.chains.removeValue(forKey: chain) } else { table.chains[chain] = entry }
            return action
        }
    }

    /// Forgets `chain` (its login could not go on).
    func abandon(chain: UInt64) {
        table.withLock { table in _ = table.chains.removeValue(forKey: chain) }
    }

    private func prune(_ table: inout Table, now: Double) {
        table.states = table.states.filter { $0.value.expires > now }
        table.chains = table.chains.filter { $0.value.expires > now }
        while table.states.count >= Self.capacity,
            let oldest = table.states.min(by: { $0.value.expires < $1.value.expires })
        {
            table.states.removeValue(forKey: oldest.key)
        }
        while table.chains.count >= Self.capacity,
            let oldest = table.chains.min(by: { $0.value.expires < $1.value.expires })
        {
            table.chains.removeValue(forKey: oldest.key)
        }
    }
}
