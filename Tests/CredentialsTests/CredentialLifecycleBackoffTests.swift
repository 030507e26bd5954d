import Testing

@testable import Credentials

@Suite("Credential lifecycle: backoff, tokens without refresh, client_credentials, stray events")
struct CredentialLifecycleBackoffTests {
    let now = lifecycleT0

    /// A logged-in lifecycle whose refresh (for waiters 1 and 2) just failed as unavailable at `now`.
    func inBackoff(jitter: Double = 0.5) -> CredentialLifecycle {
        var life = loggedInLifecycle()
        _ = life.refreshWanted(waiter: 1, now: now)
        _ = life.refreshWanted(waiter: 2, now: now)
        _ = life.refreshUnavailable("down", now: now, jitter: jitter)
        return life
    }

    // MARK: backoff

    @Test("unavailable: tokens kept, still logged in, waiters .unavailable, retry at now + 1 × (0.5 + jitter)")
    func unavailableKeepsLogin() {
        var life = loggedInLifecycle()
        _ = life.refreshWanted(waiter: 1, now: now)
        _ = life.refreshWanted(waiter: 2, now: now)
        #expect(
            life.refreshUnavailable("down", now: now, jitter: 0.2)
                == [.publish, .scheduleRetry(at: now + 0.7), .resolve([1, 2], .unavailable("down"))])
        #expect(life.tokens == lifecycleLogin)
        #expect(life.generation == 1)
        #expect(life.status.state == .loggedIn)
        #expect(life.status.lastError == "down")
    }

    @Test("the jitter spreads the first retry over [0.5, 1.5) seconds")
    func jitterRange() {
        for (jitter, delay) in [(0.0, 0.5), (0.5, 1.0), (0.999, 1.499)] {
            var life = loggedInLifecycle()
            _ = life.refreshWanted(waiter: nil, now: now)
            #expect(
                life.refreshUnavailable("down", now: now, jitter: jitter) == [
                    .publish, .scheduleRetry(at: now + delay),
                ])
        }
    }

    @Test("consecutive failures double the delay: 1, 2, 4 … capped at 60 s")
    func backoffDoubles() {
        var life = loggedInLifecycle()
        var clock = now
        _ = life.refreshWanted(waiter: nil, now: clock)
        var delays: [Double] = []
        for _ in 0..<9 {
            let actions = life.refreshUnavailable("down", now: clock, jitter: 0.5)
            guard case .scheduleRetry(let at) = actions.last else {
                Issue.record("no retry scheduled: \(actions)")
                return
            }
            delays.append(at - clock)
            clock = at
            // Each retry refreshes with the kept refresh token.
            #expect(life.retryDue(now: clock) == [.startRefresh(refreshToken: "rt-1"), .publish])
        }
        #expect(delays == [1, 2, 4, 8, 16, 32, 60, 60, 60])
    }

    @Test("a request during backoff, before retryAt, is told .unavailable at once with no new refresh")
    func requestDuringBackoff() {
        var life = inBackoff()
        #expect(life.refreshWanted(waiter: 3, now: now + 0.5) == [.resolve([3], .unavailable("down"))])
        #expect(life.refreshWanted(waiter: nil, now: now + 0.999) == [])
        #expect(life.status.state == .loggedIn)
        #expect(life.status.lastError == "down")
        // Still in backoff: the retry comes as scheduled.
        #expect(life.retryDue(now: now + 1) == [.startRefresh(refreshToken: "rt-1"), .publish])
    }

    @Test("a request at or after retryAt starts the refresh itself and waits for it")
    func requestAfterRetryAt() {
        var life = inBackoff()
        #expect(life.refreshWanted(waiter: 3, now: now + 1) == [.startRefresh(refreshToken: "rt-1"), .publish])
        #expect(life.status.state == .refreshing)
        // The retry timer that fires later does not start a second refresh.
        #expect(life.retryDue(now: now + 1.01) == [])
        #expect(
            life.refreshUnavailable("still down", now: now + 2, jitter: 0.5)
                == [.publish, .scheduleRetry(at: now + 4), .resolve([3], .unavailable("still down"))])
    }

    @Test("retryDue starts a refresh; its success clears lastError and resets the delay to 1 s")
    func successResetsBackoff() {
        var life = inBackoff()
        #expect(life.retryDue(now: now + 1) == [.startRefresh(refreshToken: "rt-1"), .publish])
        #expect(life.status == AuthStatus(state: .refreshing, expiresAt: now + 3600, subject: "u1", lastError: "down"))
        _ = life.refreshUnavailable("down", now: now + 1, jitter: 0.5)  // second failure: 2 s
        _ = life.retryDue(now: now + 3)
        let response = TokenSet(accessToken: "at-2", expiresAt: now + 7200)
        #expect(life.refreshSucceeded(response).contains(.publish))
        #expect(life.status.lastError == nil)
        #expect(life.generation == 2)

        _ = life.refreshWanted(waiter: nil, now: now + 7140)
        #expect(
            life.refreshUnavailable("down again", now: now + 7140, jitter: 0.5)
                == [.publish, .scheduleRetry(at: now + 7141)])
    }

    @Test("a login during backoff resets the delay and ignores the stale retry timer")
    func loginDuringBackoff() {
        var life = inBackoff()
        _ = life.retryDue(now: now + 1)
        _ = life.refreshUnavailable("down", now: now + 1, jitter: 0.5)
        let fresh = TokenSet(accessToken: "at-9", refreshToken: "rt-9", expiresAt: now + 3600)
        _ = life.loggedIn(fresh)
        #expect(life.status == AuthStatus(state: .loggedIn, expiresAt: now + 3600))
        #expect(life.retryDue(now: now + 3) == [])
        _ = life.refreshWanted(waiter: nil, now: now + 10)
        #expect(
            life.refreshUnavailable("down", now: now + 10, jitter: 0.5) == [.publish, .scheduleRetry(at: now + 11)])
    }

    @Test("logout during backoff: revoke, clear, and the retry timer then does nothing")
    func logoutDuringBackoff() {
        var life = inBackoff()
        #expect(life.loggedOut() == [.revoke("rt-1"), .clearStore, .publish, .scheduleRefresh(at: nil)])
        #expect(life.status == AuthStatus(state: .loggedOut))
        #expect(life.retryDue(now: now + 1) == [])
    }

    @Test("refused after backoff: the login is lost and lastError is the refusal")
    func refusedAfterBackoff() {
        var life = inBackoff()
        _ = life.retryDue(now: now + 1)
        #expect(
            life.refreshRefused("invalid_grant", now: now, jitter: 0.5) == [
                .clearStore, .publish, .scheduleRefresh(at: nil),
            ])
        #expect(life.status == AuthStatus(state: .awaitingAuthorization, lastError: "invalid_grant"))
        #expect(life.retryDue(now: now + 5) == [])
    }

    @Test("retryDue fired a moment before retryAt still retries (the timer is the authority)")
    func retryDueSlightlyEarly() {
        // A timer can fire microseconds before retryAt on the wall clock; losing that retry
        // would leave a client_credentials grant without tokens and without a timer.
        var life = CredentialLifecycle(selfService: true, refreshBefore: lifecycleRefreshBefore)
        _ = life.started(with: nil, now: now)
        #expect(life.refreshUnavailable("down", now: now, jitter: 0.5) == [.publish, .scheduleRetry(at: now + 1)])
        let actions = life.retryDue(now: now + 0.999)
        #expect(actions == [.startRefresh(refreshToken: nil), .publish])
    }

    // MARK: tokens without a refresh token (user grant)

    @Test("no refresh_token: the timer is set at expiry itself, not refreshBefore earlier")
    func noRefreshTokenSchedule() {
        var life = CredentialLifecycle(selfService: false, refreshBefore: lifecycleRefreshBefore)
        let tokens = TokenSet(accessToken: "at", expiresAt: now + 300)
        #expect(life.started(with: tokens, now: now) == [.publish, .scheduleRefresh(at: now + 300)])
        #expect(life.loggedIn(tokens) == [.persist(tokens), .publish, .scheduleRefresh(at: now + 300)])
    }

    @Test("no refresh_token: before expiry a request is .ready with no refresh; at expiry the login is lost")
    func noRefreshTokenExpiry() {
        var life = loggedInLifecycle(TokenSet(accessToken: "at", expiresAt: lifecycleT0 + 300))
        #expect(life.refreshWanted(waiter: 1, now: now + 299.9) == [.resolve([1], .ready)])
        #expect(life.refreshWanted(waiter: nil, now: now + 299.9) == [])
        #expect(life.status.state == .loggedIn)
        #expect(
            life.refreshWanted(waiter: 2, now: now + 300)
                == [.clearStore, .publish, .scheduleRefresh(at: nil), .resolve([2], .notLoggedIn)])
        #expect(life.status.state == .awaitingAuthorization)
        #expect(life.status.lastError != nil)
        #expect(life.tokens == nil)
        #expect(life.generation == 2)
    }

    @Test("no refresh_token, expired long ago: the proactive timer loses the login")
    func noRefreshTokenLongExpired() {
        var life = loggedInLifecycle(TokenSet(accessToken: "at", expiresAt: lifecycleT0 - 1000))
        #expect(life.refreshWanted(waiter: nil, now: now) == [.clearStore, .publish, .scheduleRefresh(at: nil)])
        #expect(life.status.state == .awaitingAuthorization)
    }

    @Test("no refresh_token and no expiry: every request is .ready, nothing is refreshed")
    func noRefreshTokenNoExpiry() {
        var life = loggedInLifecycle(TokenSet(accessToken: "at"))
        for waiter in 1...3 as ClosedRange<UInt64> {
            #expect(life.refreshWanted(waiter: waiter, now: now + 1e9) == [.resolve([waiter], .ready)])
        }
        #expect(life.status.state == .loggedIn)
    }

    // MARK: client_credentials (selfService)

    @Test("client_credentials refreshes with startRefresh(refreshToken: nil), even if a refresh token was issued")
    func selfServiceRefresh() {
        let tokens = TokenSet(accessToken: "cc-1", refreshToken: "ignored", expiresAt: lifecycleT0 + 300)
        var life = CredentialLifecycle(selfService: true, refreshBefore: lifecycleRefreshBefore)
        #expect(life.started(with: tokens, now: now) == [.publish, .scheduleRefresh(at: now + 240)])
        #expect(life.refreshWanted(waiter: 1, now: now + 240) == [.startRefresh(refreshToken: nil), .publish])
        _ = life.refreshUnavailable("down", now: now + 240, jitter: 0.5)
        #expect(life.retryDue(now: now + 241) == [.startRefresh(refreshToken: nil), .publish])
    }

    @Test("client_credentials without a refresh token still refreshes refreshBefore ahead of expiry")
    func selfServiceSchedule() {
        var life = CredentialLifecycle(selfService: true, refreshBefore: lifecycleRefreshBefore)
        let tokens = TokenSet(accessToken: "cc-1", expiresAt: now + 300)
        #expect(life.started(with: tokens, now: now) == [.publish, .scheduleRefresh(at: now + 240)])
        #expect(life.refreshWanted(waiter: nil, now: now + 240) == [.startRefresh(refreshToken: nil), .publish])
    }

    @Test("client_credentials: a refused fetch is retried with backoff, never left waiting for a login")
    func selfServiceRecoversFromRefusal() {
        var life = CredentialLifecycle(selfService: true, refreshBefore: lifecycleRefreshBefore)
        _ = life.started(with: TokenSet(accessToken: "cc-1", expiresAt: now + 300), now: now)
        _ = life.refreshWanted(waiter: nil, now: now + 240)
        #expect(
            life.refreshRefused("invalid_client", now: now + 240, jitter: 0.5) == [
                .publish, .scheduleRetry(at: now + 241),
            ])
        #expect(life.status.state == .loggedIn)
        #expect(life.status.lastError == "invalid_client")
        #expect(life.retryDue(now: now + 241) == [.startRefresh(refreshToken: nil), .publish])
        let next = TokenSet(accessToken: "cc-2", expiresAt: now + 550)
        #expect(life.refreshSucceeded(next) == [.persist(next), .publish, .scheduleRefresh(at: now + 490)])
        #expect(life.status == AuthStatus(state: .loggedIn, expiresAt: now + 550))
    }

    @Test("client_credentials: a failed first fetch backs off with no tokens, and its retry fetches again")
    func selfServiceFirstFetchFails() {
        var life = CredentialLifecycle(selfService: true, refreshBefore: lifecycleRefreshBefore)
        _ = life.started(with: nil, now: now)
        #expect(life.refreshUnavailable("down", now: now, jitter: 0.5) == [.publish, .scheduleRetry(at: now + 1)])
        #expect(life.retryDue(now: now + 1) == [.startRefresh(refreshToken: nil), .publish])
        _ = life.refreshUnavailable("down", now: now + 1, jitter: 0.5)
        #expect(life.refreshWanted(waiter: 1, now: now + 2) == [.resolve([1], .unavailable("down"))])
    }

    // MARK: events that do not apply

    @Test("refresh results when no refresh is in flight produce no actions and change nothing")
    func strayRefreshResults() {
        let loggedOut = CredentialLifecycle(selfService: false, refreshBefore: lifecycleRefreshBefore)
        var refused = loggedInLifecycle()
        _ = refused.refreshWanted(waiter: nil, now: now)
        _ = refused.refreshRefused("invalid_grant", now: now, jitter: 0.5)
        for start in [loggedOut, loggedInLifecycle(), refused, inBackoff()] {
            var life = start
            let status = life.status
            let generation = life.generation
            #expect(life.refreshSucceeded(TokenSet(accessToken: "stray", refreshToken: "rt-x")) == [])
            #expect(life.refreshRefused("stray", now: now, jitter: 0.5) == [])
            #expect(life.refreshUnavailable("stray", now: now, jitter: 0.5) == [])
            #expect(life.status == status)
            #expect(life.generation == generation)
        }
    }

    @Test("retryDue outside backoff produces no actions")
    func strayRetryDue() {
        var loggedOut = CredentialLifecycle(selfService: true, refreshBefore: lifecycleRefreshBefore)
        #expect(loggedOut.retryDue(now: now) == [])
        #expect(loggedOut.status.state == .loggedOut)
        var valid = loggedInLifecycle()
        #expect(valid.retryDue(now: now) == [])
        #expect(valid.status.state == .loggedIn)
        var refreshing = loggedInLifecycle()
        _ = refreshing.refreshWanted(waiter: 1, now: now)
        #expect(refreshing.retryDue(now: now) == [])
        #expect(refreshing.refreshSucceeded(TokenSet(accessToken: "at-2")).last == .resolve([1], .ready))
    }
}
