import Config
import EventLoop

/// A token exchanged for one route's audience (RFC 8693), as the loops use it.
public struct ExchangedToken: Sendable, Equatable {
    /// The token sent to the route's upstream.
    public var value: String
    /// Its type (`Bearer`).
    public var tokenType: String
    /// When it expires (Unix seconds); nil when the server did not say.
    public var expiresAt: Double?
    /// When it was obtained (Unix seconds).
    public var obtainedAt: Double
    /// The generation of the subject token it was exchanged from.
    public var generation: UInt64

    /// Whether it is too close to its expiry to send: within 30 seconds of it, or past half its
    /// life for a shorter-lived token.
    public func isStale(now: Double) -> Bool {
        guard let expiresAt else { return false }
        return now >= expiresAt - min(30, (expiresAt - obtainedAt) / 2)
    }
}

/// What a loop asking for an exchanged token is told.
public enum TokenExchangeOutcome: Sendable {
    /// The token for the route.
    case token(ExchangedToken)
    /// There is no login (no subject token).
    case notLoggedIn
    /// The auth server refused the exchange (its OAuth error, never a token).
    case refused(String)
    /// The auth server could not be reached or answered unusably.
    case unavailable(String)
}

/// What is known of each exchange target for the current subject token: nothing, an exchange
/// under way (requests wait for it: single-flight), or its token. A pure state machine: the
/// manager does what `asked` says and reports answers; tokens of a subject token that is gone
/// (a new one, or a logout) are dropped.
public struct ExchangeTable: Sendable {
    /// One target's state.
    public enum Slot: Sendable, Equatable {
        case exchanging
        case ready(ExchangedToken)
    }

    /// What the manager does for a request.
    public enum Action: Sendable, Equatable {
        /// Answer with this token.
        case reply(ExchangedToken)
        /// An exchange for the target is under way: wait for its answer.
        case wait
        /// Start the exchange, and wait for its answer.
        case start
    }

    /// The subject token generation the slots belong to.
    public private(set) var generation: UInt64 = 0
    public private(set) var slots: [TokenExchangeConfiguration: Slot] = [:]

    public init() {}

    /// Forgets every slot on a new subject token or a logout.
    public mutating func follow(generation: UInt64, loggedIn: Bool) {
        guard generation != self.generation || !loggedIn else { return }
        self.generation = generation
        slots.removeAll()
    }

    /// A request for `target`'s token, with subject token `generation` in force.
    public mutating func asked(_ target: TokenExchangeConfiguration, generation: UInt64, now: Double) -> Action {
        follow(generation: generation, loggedIn: true)
        switch slots[target] {
        case .ready(let token)? where !token.isStale(now: now): return .reply(token)
        case .exchanging?: return .wait
        case .ready?, nil:
            slots[target] = .exchanging
            return .start
        }
    }

    /// The exchange for `target` started under `generation` answered (`token` nil: it failed).
    /// Only an answer for the current subject token changes the slot.
    public mutating func answered(_ target: TokenExchangeConfiguration, generation: UInt64, token: ExchangedToken?) {
        guard generation == self.generation, slots[target] == .exchanging else { return }
        slots[target] = token.map { .ready($0) }
    }
}

/// The requests waiting for exchanges, each under the subject-token generation of the exchange
/// it waits for. An exchange's answer goes only to the requests of its generation: one started
/// before a logout or a new subject token (its answer a refusal of a revoked token, or a token
/// exchanged from the old one) never answers a request that came after and waits for its own.
public struct ExchangeWaiters<Reply> {
    private var waiting: [TokenExchangeConfiguration: [(generation: UInt64, reply: Reply)]] = [:]

    public init() {}

    /// `reply` waits for the exchange of `target` under `generation`.
    public mutating func add(_ reply: Reply, for target: TokenExchangeConfiguration, generation: UInt64) {
        waiting[target, default: []].append((generation, reply))
    }

    /// Takes the requests the answer of `target`'s exchange under `generation` is for, in order.
    public mutating func take(_ target: TokenExchangeConfiguration, generation: UInt64) -> [Reply] {
        guard let all = waiting[target] else { return [] }
        let taken = all.filter { $0.generation == generation }.map(\.reply)
        let kept = all.filter { $0.generation != generation }
        waiting[target] = kept.isEmpty ? nil : kept
        return taken
    }

    /// How many requests wait for `target`.
    public func count(_ target: TokenExchangeConfiguration) -> Int { waiting[target]?.count ?? 0 }
}

/// The table and the requests waiting per target. Touched only on the manager's loop.
final class ExchangedTokens {
    var table = ExchangeTable()
    var waiting = ExchangeWaiters<(EventLoop, LoopBound<(TokenExchangeOutcome) -> Void>)>()

    /// Drops the tokens of a subject token that is gone.
    func follow(generation: UInt64, loggedIn: Bool) { table.follow(generation: generation, loggedIn: loggedIn) }
}

extension CredentialManager {
    /// The token exchanged for `target` from the current access token: the cached one while it
    /// is fresh, else one exchange per target whoever asks (single-flight). `done` runs on `caller`.
    public func exchangedToken(
        for target: TokenExchangeConfiguration, replyOn caller: EventLoop,
        _ done: @escaping (TokenExchangeOutcome) -> Void
    ) {
        let done = LoopBound(done, on: caller)
        loop.execute { [self] in
            guard let subject = lifecycle.tokens, lifecycle.status.loggedIn else {
                return caller.execute { done.value(.notLoggedIn) }
            }
            let generation = lifecycle.generation
            switch exchanges.table.asked(target, generation: generation, now: UnixTime.now()) {
            case .reply(let token): return caller.execute { done.value(.token(token)) }
            case .wait: return exchanges.waiting.add((caller, done), for: target, generation: generation)
            case .start: exchanges.waiting.add((caller, done), for: target, generation: generation)
            }
            oauth.exchange(subjectToken: subject.accessToken, for: target) { [self] result in
                let outcome: TokenExchangeOutcome
                switch result {
                case .success(let tokens):
                    let token = ExchangedToken(
                        value: tokens.accessToken, tokenType: tokens.tokenType, expiresAt: tokens.expiresAt,
                        obtainedAt: UnixTime.now(), generation: generation)
                    exchanges.table.answered(target, generation: generation, token: token)
                    emit(
                        .info, "token_exchanged",
                        [
                            "audience": .string(target.audience ?? ""),
                            "expiresAt": tokens.expiresAt.map { .double($0) } ?? .string("unknown"),
                        ])
                    outcome = .token(token)
                case .failure(.refused(let reason)):
                    exchanges.table.answered(target, generation: generation, token: nil)
                    emit(
                        .warning, "token_exchange_refused",
                        ["audience": .string(target.audience ?? ""), "reason": .string(reason)])
                    outcome = .refused(reason)
                case .failure(.unavailable(let reason)):
                    exchanges.table.answered(target, generation: generation, token: nil)
                    emit(
                        .warning, "token_exchange_unavailable",
                        ["audience": .string(target.audience ?? ""), "reason": .string(reason)])
                    outcome = .unavailable(reason)
                }
                for (waiter, reply) in exchanges.waiting.take(target, generation: generation) {
                    waiter.execute { reply.value(outcome) }
                }
            }
        }
    }
}
