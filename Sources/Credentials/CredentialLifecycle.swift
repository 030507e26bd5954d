/// The token lifecycle as a value (docs/architecture.md, "State machines as values"): `loggedOut /
/// awaitingAuthorization → valid ⇄ refreshing(waiters) → backoff`. Events in, actions out;
/// `CredentialManager` performs the I/O. Refresh is single-flight: every request that needs one
/// while it runs only waits.
public struct CredentialLifecycle: Sendable {
    /// Identifies a request waiting for a refresh.
    public typealias Waiter = UInt64

    /// How a wait ended.
    public enum Outcome: Sendable, Equatable {
        /// Tokens are usable (possibly unchanged, if no refresh was possible or needed).
        case ready
        /// The auth server could not be reached; the login is kept.
        case unavailable(String)
        /// There is no login (refused, logged out, or never logged in).
        case notLoggedIn
        /// An upstream 401 came too soon after the tokens were obtained: no refresh was made.
        case suppressed
    }

    /// Work for the owner.
    public enum Action: Sendable, Equatable {
        /// Call the token endpoint: refresh with `refreshToken`, or (nil) a client-credentials grant.
        case startRefresh(refreshToken: String?)
        /// Write the tokens to the store.
        case persist(TokenSet)
        /// Remove the store.
        case clearStore
        /// Revoke this refresh token (RFC 7009), best effort.
        case revoke(String)
        /// Tell every loop the new snapshot.
        case publish
        /// Refresh proactively at this time (Unix seconds); nil cancels.
        case scheduleRefresh(at: Double?)
        /// Retry a failed refresh at this time.
        case scheduleRetry(at: Double)
        /// End these waits.
        case resolve([Waiter], Outcome)
    }

    private enum State: Sendable, Equatable {
        case loggedOut
        case awaitingAuthorization(reason: String)
        case valid(TokenSet)
        case refreshing(TokenSet?, waiters: [Waiter])
        case backoff(TokenSet?, retryAt: Double, error: String)
    }

    private var state: State = .loggedOut
    /// Whether tokens are renewed without a user (client_credentials): no refresh token needed.
    public let selfService: Bool
    /// Seconds before expiry at which to refresh.
    public let refreshBefore: Double
    /// Increases whenever the tokens change.
    public private(set) var generation: UInt64 = 0
    private var lastError: String?
    /// Consecutive unavailable refreshes, for the backoff.
    private var failures = 0
    /// Seconds tokens must have been in use before an upstream 401 may refresh them.
    public let minRefreshInterval: Double
    /// When the tokens in use were obtained (Unix seconds); nil when unknown (stored at start).
    public private(set) var obtainedAt: Double?
    /// Upstream 401s answered without a refresh because the tokens were younger than `minRefreshInterval`.
    public private(set) var suppressedRefreshes = 0
    /// Whether a refresh since the last tokens ended without an answer (a timeout): the provider
    /// may have rotated the refresh token all the same, so a refusal of the old one does not
    /// prove the login is gone (the first refusal after it is excused, and clears it).
    public private(set) var answerLost = false

    /// A lifecycle for a grant; `selfService` for client_credentials. `minRefreshInterval`
    /// bounds refreshes asked for by upstream 401s (an app or a page can make those at will).
    public init(selfService: Bool, refreshBefore: Double, minRefreshInterval: Double = 0) {
        self.selfService = selfService
        self.refreshBefore = refreshBefore
        self.minRefreshInterval = minRefreshInterval
    }

    /// Whether tokens obtained at `obtainedAt` are too young at `now` for a 401 to refresh them.
    public static func tooYoung(obtainedAt: Double?, now: Double, minRefreshInterval: Double) -> Bool {
        guard let obtainedAt else { return false }
        return now - obtainedAt < minRefreshInterval
    }

    /// The tokens in use, if any.
    public var tokens: TokenSet? {
        switch state {
        case .valid(let t): t
        case .refreshing(let t, _), .backoff(let t, _, _): t
        case .loggedOut, .awaitingAuthorization: nil
        }
    }

    /// The state as apps see it.
    public var status: AuthStatus {
        let tokens = self.tokens
        let state: AuthState
        switch self.state {
        case .loggedOut: state = .loggedOut
        case .awaitingAuthorization: state = .awaitingAuthorization
        case .valid: state = .loggedIn
        case .refreshing(let t, _): state = t == nil ? .loggedOut : .refreshing
        case .backoff(let t, _, _): state = t == nil ? .loggedOut : .loggedIn
        }
        return AuthStatus(state: state, expiresAt: tokens?.expiresAt, subject: tokens?.subject, lastError: lastError)
    }

    // MARK: events

    /// Tokens found in the store at start (or none). A self-service grant fetches its first token.
    public mutating func started(with stored: TokenSet?, now: Double) -> [Action] {
        if let stored {
            state = .valid(stored)
            generation += 1
            return [.publish, .scheduleRefresh(at: refreshTime(stored, now: now))]
        }
        if selfService { return refreshWanted(waiter: nil, now: now) }
        return [.publish]
    }

    /// A login completed (code exchange, device flow, demo).
    public mutating func loggedIn(_ tokens: TokenSet, now: Double? = nil) -> [Action] {
        let waiters = currentWaiters
        state = .valid(tokens)
        obtainedAt = now
        generation += 1
        lastError = nil
        failures = 0
        answerLost = false
        return [.persist(tokens), .publish, .scheduleRefresh(at: refreshTime(tokens, now: now))]
            + resolve(waiters, .ready)
    }

    /// A request (or the proactive timer, with no waiter) wants fresh tokens.
    public mutating func refreshWanted(waiter: Waiter?, now: Double) -> [Action] {
        refreshWanted(waiter: waiter, now: now, bounded: true)
    }

    /// `bounded`: tokens obtained less than `minimumRefreshDelay` ago are not refreshed (an
    /// upstream 401 has its own bound, `minRefreshInterval`).
    private mutating func refreshWanted(waiter: Waiter?, now: Double, bounded: Bool) -> [Action] {
        let mine = waiter.map { [$0] } ?? []
        switch state {
        case .loggedOut, .awaitingAuthorization:
            guard selfService else { return resolve(mine, .notLoggedIn) }
            state = .refreshing(nil, waiters: mine)
            return [.startRefresh(refreshToken: nil), .publish]
        case .valid(let tokens):
            if bounded, let obtainedAt, now - obtainedAt < Self.minimumRefreshDelay {
                // Tokens from the last second are used as they are, even when the provider said
                // they expire at once (`expires_in: 0`): otherwise every request would refresh,
                // as fast as the provider answers. The timer refreshes when the second is over.
                let timer: [Action] = waiter == nil ? [.scheduleRefresh(at: obtainedAt + Self.minimumRefreshDelay)] : []
                return timer + resolve(mine, .ready)
            }
            if !selfService && tokens.refreshToken == nil {
                // Nothing to refresh with: the login lasts until the token expires.
                guard let expiry = tokens.expiresAt, expiry <= now else { return resolve(mine, .ready) }
                return loginLost("the access token expired and there is no refresh token", waiters: mine)
            }
            state = .refreshing(tokens, waiters: mine)
            return [.startRefresh(refreshToken: selfService ? nil : tokens.refreshToken), .publish]
        case .refreshing(let tokens, let waiters):
            state = .refreshing(tokens, waiters: waiters + mine)
            return []
        case .backoff(let tokens, let retryAt, let error):
            guard now >= retryAt else { return resolve(mine, .unavailable(error)) }
            state = .refreshing(tokens, waiters: mine)
            return [.startRefresh(refreshToken: selfService ? nil : tokens?.refreshToken), .publish]
        }
    }

    /// An upstream answered 401 to the tokens in use: refresh, unless they were obtained less
    /// than `minRefreshInterval` ago (the upstream refuses the token itself, not its age), so a
    /// route that always answers 401 causes at most one refresh per interval, whatever the rate.
    public mutating func rejected(waiter: Waiter, now: Double) -> [Action] {
        if case .valid = state, Self.tooYoung(obtainedAt: obtainedAt, now: now, minRefreshInterval: minRefreshInterval)
        {
            suppressedRefreshes += 1
            return resolve([waiter], .suppressed)
        }
        return refreshWanted(waiter: waiter, now: now, bounded: false)
    }

    /// The token endpoint answered with tokens.
    public mutating func refreshSucceeded(_ response: TokenSet, now: Double? = nil) -> [Action] {
        guard case .refreshing(let old, let waiters) = state else { return [] }
        let merged = old.map { $0.merging(refresh: response) } ?? response
        state = .valid(merged)
        obtainedAt = now
        generation += 1
        lastError = nil
        failures = 0
        answerLost = false
        return [.persist(merged), .publish, .scheduleRefresh(at: refreshTime(merged, now: now))]
            + resolve(waiters, .ready)
    }

    /// The auth server refused the refresh token (`invalid_grant`): the login is gone. After a
    /// refresh whose answer was lost, though, the provider may have rotated the token in that
    /// answer (and some accept the old one again for a short grace): the first refusal keeps the
    /// tokens and retries as in an outage, with the reason in `lastError`; a second one ends the
    /// login, since nothing but a new login can bring the rotated token back.
    public mutating func refreshRefused(_ reason: String, now: Double, jitter: Double) -> [Action] {
        guard case .refreshing(_, let waiters) = state else { return [] }
        // A service identity has no user to log in again: keep retrying, as for an outage.
        if selfService { return refreshUnavailable(reason, now: now, jitter: jitter) }
        if answerLost {
            answerLost = false
            return refreshUnavailable(
                reason + " (an earlier refresh got no answer and may have rotated the refresh "
                    + "token: the tokens are kept for one more try)", now: now, jitter: jitter)
        }
        return loginLost(reason, waiters: waiters)
    }

    /// The auth server was unreachable, answered 5xx or something unusable: keep the login,
    /// retry with backoff. `rotatedRefreshToken`: the refresh token the unusable answer carried,
    /// kept and stored (the old one may be spent). `answerLost`: no answer came at all.
    public mutating func refreshUnavailable(
        _ reason: String, now: Double, jitter: Double,
        rotatedRefreshToken: String? = nil, answerLost lost: Bool = false
    ) -> [Action] {
        guard case .refreshing(var tokens, let waiters) = state else { return [] }
        failures += 1
        if lost { answerLost = true }
        var actions: [Action] = []
        if !selfService, let rotated = rotatedRefreshToken, var kept = tokens, kept.refreshToken != rotated {
            kept.refreshToken = rotated
            tokens = kept
            actions.append(.persist(kept))
        }
        // 1, 2, 4 … 60 s, times a jitter in [0.5, 1.5) so many proxies do not retry in step.
        let retryAt = now + min(60, pow2(failures - 1)) * (0.5 + jitter)
        state = .backoff(tokens, retryAt: retryAt, error: reason)
        lastError = reason
        return actions + [.publish, .scheduleRetry(at: retryAt)] + resolve(waiters, .unavailable(reason))
    }

    /// The retry time came.
    public mutating func retryDue(now: Double) -> [Action] {
        // The retry timer is the authority: a timer firing a hair early must not be lost.
        guard case .backoff(let tokens, _, _) = state else { return [] }
        state = .refreshing(tokens, waiters: [])
        return [.startRefresh(refreshToken: selfService ? nil : tokens?.refreshToken), .publish]
    }

    /// A login attempt ended without tokens (a device login the user refused, or that expired):
    /// the tokens in hand, if any, stay; the reason is published, so whoever waits for the
    /// login (`platform-proxy login --device`, `/_platform/auth`) learns it ended.
    public mutating func loginFailed(_ reason: String) -> [Action] {
        lastError = reason
        return [.publish]
    }

    /// A new login attempt began: an error from an earlier one is no longer news.
    public mutating func loginStarted() -> [Action] {
        guard lastError != nil else { return [] }
        lastError = nil
        return [.publish]
    }

    /// The user logged out: revoke, forget, tell everyone. A service identity (client
    /// credentials) has no login to wait for: it fetches a new token at once, so its routes
    /// are not left gated until a restart (found by a review).
    public mutating func loggedOut() -> [Action] {
        let waiters = currentWaiters
        let refresh = tokens?.refreshToken
        state = selfService ? .refreshing(nil, waiters: []) : .loggedOut
        obtainedAt = nil
        generation += 1
        lastError = nil
        failures = 0
        answerLost = false
        var actions: [Action] = refresh.map { [.revoke($0)] } ?? []
        actions += [.clearStore, .publish, .scheduleRefresh(at: nil)]
        if selfService { actions.append(.startRefresh(refreshToken: nil)) }
        return actions + resolve(waiters, .notLoggedIn)
    }

    // MARK: helpers

    private var currentWaiters: [Waiter] {
        if case .refreshing(_, let waiters) = state { return waiters }
        return []
    }

    private mutating func loginLost(_ reason: String, waiters: [Waiter]) -> [Action] {
        state = .awaitingAuthorization(reason: reason)
        generation += 1
        lastError = reason
        failures = 0
        return [.clearStore, .publish, .scheduleRefresh(at: nil)] + resolve(waiters, .notLoggedIn)
    }

    private func resolve(_ waiters: [Waiter], _ outcome: Outcome) -> [Action] {
        waiters.isEmpty ? [] : [.resolve(waiters, outcome)]
    }

    /// When the proactive refresh is due: `refreshBefore` ahead of expiry, but no further ahead
    /// than half the token's remaining life, and never sooner than `minimumRefreshDelay` (or
    /// `minRefreshInterval`) from `now`. A token that lives shorter than `refreshBefore`, or
    /// arrives expired (`expires_in: 0`, clock skew), would otherwise be due again at once, and
    /// again after that: a storm of refreshes at the IdP. (Requests still refresh an expired
    /// token on demand.)
    private func refreshTime(_ tokens: TokenSet, now: Double?) -> Double? {
        guard let expiry = tokens.expiresAt else { return nil }
        guard selfService || tokens.refreshToken != nil else { return expiry }
        guard let now else { return expiry - refreshBefore }
        let lead = min(refreshBefore, max(0, expiry - now) / 2)
        return max(expiry - lead, now + max(minRefreshInterval, Self.minimumRefreshDelay))
    }

    /// The shortest wait before a proactive refresh, whatever the token's lifetime.
    public static let minimumRefreshDelay: Double = 1

    private func pow2(_ n: Int) -> Double {
        var value = 1.0
        for _ in 0..<max(0, n) { value *= 2 }
        return value
    }
}
