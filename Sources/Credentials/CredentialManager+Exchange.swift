import Config
import EventLoop

/// A token exchanged for one route's audience (RFC 8693), as the loops use it.
package struct ExchangedToken: Sendable, Equatable {
    /// The token sent to the route's upstream.
    package var value: String
    /// Its type (`Bearer`).
    package var tokenType: String
    /// When it expires (Unix seconds); nil when the server did not say.
    package var expiresAt: Double?
    /// When it was obtained (Unix seconds).
    package var obtainedAt: Double
    /// The generation of the subject token it was exchanged from.
    package var generation: UInt64

    /// Whether it is too close to its expiry to send: within 30 seconds of it, or past half its
    /// life for a shorter-lived token.
    package func isStale(now: Double) -> Bool {
        guard let expiresAt else { return false }
        return now >= expiresAt - min(30, (expiresAt - obtainedAt) / 2)
    }
}

/// What a loop asking for an exchanged token is told.
package enum TokenExchangeOutcome: Sendable {
    /// The token for the route.
    case token(ExchangedToken)
    /// There is no login (no subject token).
    case notLoggedIn
    /// The auth server refused the exchange (its OAuth error, never a token).
    case refused(String)
    /// The auth server could not be reached or answered unusably.
    case unavailable(String)
}

/// The exchanged tokens of the current subject token, per exchange target, and the exchanges
/// under way (single-flight per target). Touched only on the manager's loop.
final class ExchangedTokens {
    private(set) var generation: UInt64 = 0
    var tokens: [TokenExchangeConfiguration: ExchangedToken] = [:]
    var waiting: [TokenExchangeConfiguration: [(EventLoop, LoopBound<(TokenExchangeOutcome) -> Void>)]] = [:]

    /// Drops every token on a new subject token or a logout: they were exchanged from one that
    /// is gone, and must not outlive it.
    func follow(generation: UInt64, loggedIn: Bool) {
        guard generation != self.generation || !loggedIn else { return }
        self.generation = generation
        tokens.removeAll()
    }
}

extension CredentialManager {
    /// The token exchanged for `target` from the current access token: the cached one while it
    /// is fresh, else one exchange per target whoever asks (single-flight). `done` runs on `caller`.
    package func exchangedToken(for target: TokenExchangeConfiguration, replyOn caller: EventLoop,
                                _ done: @escaping (TokenExchangeOutcome) -> Void) {
        let done = LoopBound(done, on: caller)
        loop.execute { [self] in
            guard let subject = lifecycle.tokens, lifecycle.status.loggedIn else {
                return caller.execute { done.value(.notLoggedIn) }
            }
            exchanges.follow(generation: lifecycle.generation, loggedIn: true)
            if let token = exchanges.tokens[target], !token.isStale(now: UnixTime.now()) {
                return caller.execute { done.value(.token(token)) }
            }
            if exchanges.waiting[target] != nil { return exchanges.waiting[target]!.append((caller, done)) }
            exchanges.waiting[target] = [(caller, done)]
            let generation = lifecycle.generation
            oauth.exchange(subjectToken: subject.accessToken, for: target) { [self] result in
                let outcome: TokenExchangeOutcome
                switch result {
                case .success(let tokens):
                    let token = ExchangedToken(value: tokens.accessToken, tokenType: tokens.tokenType, expiresAt: tokens.expiresAt,
                                               obtainedAt: UnixTime.now(), generation: generation)
                    // Kept only while its subject token is the current one.
                    if exchanges.generation == generation, lifecycle.generation == generation { exchanges.tokens[target] = token }
                    emit(.info, "token_exchanged", ["audience": .string(target.audience ?? ""),
                                                    "expiresAt": tokens.expiresAt.map { .double($0) } ?? .string("unknown")])
                    outcome = .token(token)
                case .failure(.refused(let reason)):
                    emit(.warning, "token_exchange_refused", ["audience": .string(target.audience ?? ""), "reason": .string(reason)])
                    outcome = .refused(reason)
                case .failure(.unavailable(let reason)):
                    emit(.warning, "token_exchange_unavailable", ["audience": .string(target.audience ?? ""), "reason": .string(reason)])
                    outcome = .unavailable(reason)
                }
                for (waiter, reply) in exchanges.waiting.removeValue(forKey: target) ?? [] { waiter.execute { reply.value(outcome) } }
            }
        }
    }
}
