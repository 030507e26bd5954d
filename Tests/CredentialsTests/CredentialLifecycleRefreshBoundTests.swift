import Testing

@testable import Credentials

@Suite("Credential lifecycle: 401 refreshes bounded by minRefreshInterval")
struct CredentialLifecycleRefreshBoundTests {
    let now = lifecycleT0
    private let interval = 30.0

    /// A lifecycle logged in at `lifecycleT0` (so its tokens' age is known).
    private func freshLogin() -> CredentialLifecycle {
        var life = CredentialLifecycle(
            selfService: false, refreshBefore: lifecycleRefreshBefore, minRefreshInterval: interval)
        _ = life.started(with: nil, now: now)
        _ = life.loggedIn(lifecycleLogin, now: now)
        return life
    }

    @Test(
        "a 401 refreshes only once the tokens are minRefreshInterval old",
        arguments: [(0.0, false), (1, false), (29.9, false), (30, true), (600, true)])
    func byAge(age: Double, refreshes: Bool) {
        var life = freshLogin()
        let actions = life.rejected(waiter: 1, now: now + age)
        if refreshes {
            #expect(actions == [.startRefresh(refreshToken: "rt-1"), .publish])
            #expect(life.suppressedRefreshes == 0)
        } else {
            #expect(actions == [.resolve([1], .suppressed)])
            #expect(life.suppressedRefreshes == 1)
            #expect(life.status.state == .loggedIn)
        }
    }

    @Test("a 401 storm: one refresh per interval, every other 401 suppressed, whatever the rate")
    func storm() {
        var life = freshLogin()
        var starts = 0
        var clock = now + 30
        // 10 requests a second for 95 s, each answered 401 by the upstream.
        for tick in 0..<950 {
            clock = now + 30 + Double(tick) / 10
            let waiter = UInt64(tick + 1)
            let actions = life.rejected(waiter: waiter, now: clock)
            if actions.contains(.startRefresh(refreshToken: "rt-1")) {
                starts += 1
                _ = life.refreshSucceeded(TokenSet(accessToken: "at-\(tick)", expiresAt: clock + 3600), now: clock)
            }
        }
        // Refreshes at 30, 60, 90, 120 s after the login: one per interval.
        #expect(starts == 4)
        #expect(life.suppressedRefreshes == 950 - 4)
    }

    @Test("401s while a refresh runs join it; they are not suppressed")
    func joinsRefreshInFlight() {
        var life = freshLogin()
        #expect(life.rejected(waiter: 1, now: now + 40) == [.startRefresh(refreshToken: "rt-1"), .publish])
        #expect(life.rejected(waiter: 2, now: now + 40) == [])
        let done = life.refreshSucceeded(TokenSet(accessToken: "at-2", expiresAt: now + 3600), now: now + 41)
        #expect(done.last == .resolve([1, 2], .ready))
        #expect(life.suppressedRefreshes == 0)
    }

    @Test("tokens of unknown age (stored at start) may be refreshed by the first 401")
    func unknownAge() {
        var life = CredentialLifecycle(
            selfService: false, refreshBefore: lifecycleRefreshBefore, minRefreshInterval: interval)
        _ = life.started(with: lifecycleLogin, now: now)
        #expect(life.obtainedAt == nil)
        #expect(life.rejected(waiter: 1, now: now) == [.startRefresh(refreshToken: "rt-1"), .publish])
    }

    @Test(
        "tooYoung",
        arguments: [(nil, 0.0, false), (100.0, 110.0, true), (100.0, 130.0, false)] as [(Double?, Double, Bool)])
    func tooYoung(obtainedAt: Double?, at: Double, expected: Bool) {
        #expect(CredentialLifecycle.tooYoung(obtainedAt: obtainedAt, now: at, minRefreshInterval: 30) == expected)
    }
}

@Suite("Credential lifecycle: when the proactive refresh is due, whatever the token's lifetime")
struct CredentialLifecycleRefreshTimeTests {
    /// (lifetime in seconds at receipt, minRefreshInterval, expected delay from receipt to the refresh)
    /// with refreshBefore 60: a long token is refreshed 60 s ahead; a shorter one at half its life;
    /// one that arrives expired or nearly so no sooner than 1 s (or minRefreshInterval) later.
    @Test(
        "refresh delay after a token arrives, by its lifetime (refreshBefore 60)",
        arguments: [
            (3600.0, 0.0, 3540.0), (121, 0, 61), (120, 0, 60), (30, 0, 15), (10, 0, 5), (3, 0, 1.5),
            (1.5, 0, 1), (1, 0, 1), (0, 0, 1), (-30, 0, 1), (30, 20, 20), (3600, 20, 3540),
        ]
            as [(Double, Double, Double)])
    func delayByLifetime(lifetime: Double, minInterval: Double, delay: Double) {
        let now = lifecycleT0
        let tokens = TokenSet(accessToken: "at", refreshToken: "rt", expiresAt: now + lifetime)
        let expected: [CredentialLifecycle.Action] = [.publish, .scheduleRefresh(at: now + delay)]
        for selfService in [false, true] {
            var life = CredentialLifecycle(
                selfService: selfService, refreshBefore: lifecycleRefreshBefore,
                minRefreshInterval: minInterval)
            #expect(life.started(with: tokens, now: now) == expected, "started, selfService \(selfService)")
            _ = life.refreshWanted(waiter: nil, now: now)
            #expect(
                life.refreshSucceeded(tokens, now: now).contains(.scheduleRefresh(at: now + delay)),
                "refreshed, selfService \(selfService)")
        }
    }

    @Test("a token the IdP keeps issuing with 30 s to live is refreshed every 15 s, not at once and again")
    func noStormForShortTokens() {
        var life = CredentialLifecycle(selfService: true, refreshBefore: lifecycleRefreshBefore)
        var now = lifecycleT0
        _ = life.started(with: nil, now: now)
        var refreshes = 0
        var due: Double? = now
        while let at = due, at <= lifecycleT0 + 60 {
            now = at
            _ = life.refreshWanted(waiter: nil, now: now)
            refreshes += 1
            let actions = life.refreshSucceeded(TokenSet(accessToken: "at-\(refreshes)", expiresAt: now + 30), now: now)
            due = actions.compactMap { if case .scheduleRefresh(let at) = $0 { return at } else { return nil } }.first
        }
        #expect(refreshes == 5)  // at 0, 15, 30, 45, 60
    }
}

@Suite("Credential lifecycle: a login attempt that fails")
struct CredentialLifecycleLoginAttemptTests {
    @Test("a failed attempt publishes its reason and keeps the tokens in hand; the next attempt clears it")
    func failedThenStarted() {
        var loggedOut = CredentialLifecycle(selfService: false, refreshBefore: lifecycleRefreshBefore)
        _ = loggedOut.started(with: nil, now: lifecycleT0)
        #expect(loggedOut.loginStarted() == [])
        #expect(loggedOut.loginFailed("the device login expired") == [.publish])
        #expect(loggedOut.status.state == .loggedOut && loggedOut.status.lastError == "the device login expired")
        #expect(loggedOut.loginStarted() == [.publish])
        #expect(loggedOut.status.lastError == nil)

        var life = loggedInLifecycle()
        let generation = life.generation
        #expect(life.loginFailed("access_denied") == [.publish])
        #expect(life.status.state == .loggedIn && life.tokens == lifecycleLogin && life.generation == generation)
        #expect(life.status.lastError == "access_denied")
        _ = life.loggedIn(lifecycleLogin, now: lifecycleT0)
        #expect(life.status.lastError == nil)
    }

    @Test("logging out a service identity forgets its token and fetches a new one; a user's waits for a login")
    func logoutOfAServiceIdentity() {
        let service = TokenSet(accessToken: "svc-1", expiresAt: lifecycleT0 + 3600)
        var selfService = loggedInLifecycle(service, selfService: true)
        #expect(
            selfService.loggedOut() == [
                .clearStore, .publish, .scheduleRefresh(at: nil), .startRefresh(refreshToken: nil),
            ])
        #expect(selfService.tokens == nil && selfService.status.state == .loggedOut)
        let fresh = TokenSet(accessToken: "svc-2", expiresAt: lifecycleT0 + 3600)
        #expect(selfService.refreshSucceeded(fresh, now: lifecycleT0).first == .persist(fresh))
        #expect(selfService.status.state == .loggedIn)

        var user = loggedInLifecycle()
        #expect(user.loggedOut() == [.revoke("rt-1"), .clearStore, .publish, .scheduleRefresh(at: nil)])
        #expect(user.status.state == .loggedOut)
    }
}
