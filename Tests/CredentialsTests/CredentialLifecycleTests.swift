import Testing

@testable import Credentials

/// A manual clock: every `now` is a plain number of Unix seconds passed in by the test.
let lifecycleT0 = 1_700_000_000.0
/// Seconds before expiry at which the lifecycles under test refresh.
let lifecycleRefreshBefore = 60.0

/// An unsigned JWT whose payload is `payload` (only the claims are read).
func lifecycleJWT(_ payload: String) -> String {
    Base64URL.encode(Array(#"{"alg":"none"}"#.utf8)) + "." + Base64URL.encode(Array(payload.utf8)) + "."
}

/// A login expiring an hour after `lifecycleT0`, with refresh and id tokens.
let lifecycleLogin = TokenSet(
    accessToken: "at-1", idToken: lifecycleJWT(#"{"sub":"u1"}"#), refreshToken: "rt-1",
    expiresAt: lifecycleT0 + 3600, scope: "openid profile")

/// A lifecycle for a user grant that is logged in with `lifecycleLogin`.
func loggedInLifecycle(_ tokens: TokenSet = lifecycleLogin, selfService: Bool = false) -> CredentialLifecycle {
    var life = CredentialLifecycle(selfService: selfService, refreshBefore: lifecycleRefreshBefore)
    _ = life.started(with: tokens, now: lifecycleT0)
    return life
}

@Suite("Credential lifecycle: start, single flight, success, refusal, logout")
struct CredentialLifecycleTests {
    let now = lifecycleT0

    // MARK: start

    @Test("stored tokens at start: logged in, published, proactive refresh at expiresAt − refreshBefore")
    func startWithStoredTokens() {
        var life = CredentialLifecycle(selfService: false, refreshBefore: lifecycleRefreshBefore)
        let actions = life.started(with: lifecycleLogin, now: now)
        #expect(actions == [.publish, .scheduleRefresh(at: now + 3600 - 60)])
        #expect(life.tokens == lifecycleLogin)
        #expect(life.generation == 1)
        #expect(life.status == AuthStatus(state: .loggedIn, expiresAt: now + 3600, subject: "u1", lastError: nil))
        #expect(life.status.loggedIn)
    }

    @Test("stored tokens that never expire: no proactive refresh is scheduled")
    func startWithoutExpiry() {
        var life = CredentialLifecycle(selfService: false, refreshBefore: lifecycleRefreshBefore)
        let tokens = TokenSet(accessToken: "at", refreshToken: "rt")
        #expect(life.started(with: tokens, now: now) == [.publish, .scheduleRefresh(at: nil)])
        #expect(life.status.state == .loggedIn)
    }

    @Test("no stored tokens for a user grant: logged out, published, nothing fetched")
    func startWithoutTokens() {
        var life = CredentialLifecycle(selfService: false, refreshBefore: lifecycleRefreshBefore)
        #expect(life.started(with: nil, now: now) == [.publish])
        #expect(life.tokens == nil)
        #expect(life.generation == 0)
        #expect(life.status == AuthStatus(state: .loggedOut))
        #expect(!life.status.loggedIn)
    }

    @Test("no stored tokens for client_credentials: the first token is fetched without a refresh token")
    func startSelfServiceWithoutTokens() {
        var life = CredentialLifecycle(selfService: true, refreshBefore: lifecycleRefreshBefore)
        #expect(life.started(with: nil, now: now) == [.startRefresh(refreshToken: nil), .publish])
        // Fetching with no tokens yet is still "no login" to apps.
        #expect(life.status.state == .loggedOut)
        let first = TokenSet(accessToken: "cc-1", expiresAt: now + 300)
        #expect(
            life.refreshSucceeded(first)
                == [.persist(first), .publish, .scheduleRefresh(at: now + 300 - 60)])
        #expect(life.tokens == first)
        #expect(life.status.state == .loggedIn)
    }

    // MARK: single flight

    @Test("single flight: 50 requests while refreshing cause one startRefresh and one resolve of all 50")
    func singleFlight() {
        var life = loggedInLifecycle()
        var actions: [CredentialLifecycle.Action] = []
        for waiter in 1...50 as ClosedRange<UInt64> {
            actions += life.refreshWanted(waiter: waiter, now: now + Double(waiter) / 100)
        }
        #expect(actions == [.startRefresh(refreshToken: "rt-1"), .publish])
        #expect(life.status.state == .refreshing)

        let response = TokenSet(accessToken: "at-2", refreshToken: "rt-2", expiresAt: now + 7200)
        let done = life.refreshSucceeded(response)
        let resolves = done.filter { if case .resolve = $0 { true } else { false } }
        #expect(resolves == [.resolve(Array(1...50), .ready)])
        #expect(!done.contains(.startRefresh(refreshToken: "rt-2")))
        // Nothing is left waiting: a second success is not for this state.
        #expect(life.refreshSucceeded(response) == [])
    }

    @Test("the proactive timer (no waiter) joins a refresh in flight without a second call")
    func timerJoinsRefresh() {
        var life = loggedInLifecycle()
        #expect(life.refreshWanted(waiter: 7, now: now) == [.startRefresh(refreshToken: "rt-1"), .publish])
        #expect(life.refreshWanted(waiter: nil, now: now) == [])
        let response = TokenSet(accessToken: "at-2", expiresAt: now + 7200)
        #expect(life.refreshSucceeded(response).last == .resolve([7], .ready))
    }

    @Test("the proactive timer refreshes with no waiter to resolve")
    func timerRefresh() {
        var life = loggedInLifecycle()
        #expect(life.refreshWanted(waiter: nil, now: now + 3540) == [.startRefresh(refreshToken: "rt-1"), .publish])
        let response = TokenSet(accessToken: "at-2", expiresAt: now + 7200)
        let merged = lifecycleLogin.merging(refresh: response)
        #expect(
            life.refreshSucceeded(response)
                == [.persist(merged), .publish, .scheduleRefresh(at: now + 7200 - 60)])
    }

    // MARK: success

    @Test("refresh success keeps the old refresh_token and id_token when the response lacks them")
    func successMerges() {
        var life = loggedInLifecycle()
        _ = life.refreshWanted(waiter: 1, now: now)
        let response = TokenSet(accessToken: "at-2", expiresAt: now + 7200)
        let expected = TokenSet(
            accessToken: "at-2", idToken: lifecycleLogin.idToken, refreshToken: "rt-1",
            expiresAt: now + 7200, scope: "openid profile")
        #expect(
            life.refreshSucceeded(response)
                == [.persist(expected), .publish, .scheduleRefresh(at: now + 7200 - 60), .resolve([1], .ready)])
        #expect(life.tokens == expected)
        #expect(life.generation == 2)
        #expect(life.status == AuthStatus(state: .loggedIn, expiresAt: now + 7200, subject: "u1"))
        // The kept refresh token is the one the next refresh uses.
        #expect(life.refreshWanted(waiter: nil, now: now + 7140) == [.startRefresh(refreshToken: "rt-1"), .publish])
    }

    @Test("refresh success takes a rotated refresh_token and a new id_token")
    func successRotates() {
        var life = loggedInLifecycle()
        _ = life.refreshWanted(waiter: nil, now: now)
        let response = TokenSet(
            accessToken: "at-2", idToken: lifecycleJWT(#"{"sub":"u2"}"#), refreshToken: "rt-2", expiresAt: now + 7200)
        _ = life.refreshSucceeded(response)
        #expect(life.tokens?.refreshToken == "rt-2")
        #expect(life.status.subject == "u2")
        #expect(life.refreshWanted(waiter: nil, now: now + 7140) == [.startRefresh(refreshToken: "rt-2"), .publish])
    }

    @Test("every successful refresh bumps the generation")
    func generationBumps() {
        var life = loggedInLifecycle()
        for round in 1...5 {
            _ = life.refreshWanted(waiter: UInt64(round), now: now)
            _ = life.refreshSucceeded(TokenSet(accessToken: "at-\(round)", expiresAt: now + 3600))
            #expect(life.generation == UInt64(1 + round))
        }
    }

    // MARK: refusal

    @Test("refused refresh: awaiting authorization, store cleared, waiters not logged in, lastError set")
    func refused() {
        var life = loggedInLifecycle()
        _ = life.refreshWanted(waiter: 1, now: now)
        _ = life.refreshWanted(waiter: 2, now: now)
        #expect(
            life.refreshRefused("invalid_grant", now: now, jitter: 0.5)
                == [.clearStore, .publish, .scheduleRefresh(at: nil), .resolve([1, 2], .notLoggedIn)])
        #expect(life.tokens == nil)
        #expect(life.generation == 2)
        #expect(life.status == AuthStatus(state: .awaitingAuthorization, lastError: "invalid_grant"))
        #expect(!life.status.loggedIn)
        // A user grant cannot fetch on its own: later requests are told at once.
        #expect(life.refreshWanted(waiter: 3, now: now) == [.resolve([3], .notLoggedIn)])
        #expect(life.refreshWanted(waiter: nil, now: now) == [])
    }

    @Test("a login after a refusal clears lastError and logs in")
    func loginAfterRefusal() {
        var life = loggedInLifecycle()
        _ = life.refreshWanted(waiter: nil, now: now)
        _ = life.refreshRefused("invalid_grant", now: now, jitter: 0.5)
        let fresh = TokenSet(accessToken: "at-9", refreshToken: "rt-9", expiresAt: now + 600)
        #expect(life.loggedIn(fresh) == [.persist(fresh), .publish, .scheduleRefresh(at: now + 600 - 60)])
        #expect(life.status == AuthStatus(state: .loggedIn, expiresAt: now + 600))
        #expect(life.generation == 3)
    }

    // MARK: login and logout

    @Test("loggedIn while a refresh is in flight resolves its waiters .ready; the late answer is ignored")
    func loginDuringRefresh() {
        var life = CredentialLifecycle(selfService: false, refreshBefore: lifecycleRefreshBefore)
        _ = life.started(with: lifecycleLogin, now: now)
        _ = life.refreshWanted(waiter: 4, now: now)
        _ = life.refreshWanted(waiter: 5, now: now)
        let fresh = TokenSet(accessToken: "at-new", refreshToken: "rt-new", expiresAt: now + 900)
        #expect(
            life.loggedIn(fresh)
                == [.persist(fresh), .publish, .scheduleRefresh(at: now + 900 - 60), .resolve([4, 5], .ready)])
        #expect(life.tokens == fresh)
        #expect(life.refreshSucceeded(TokenSet(accessToken: "stale")) == [])
        #expect(life.refreshRefused("late", now: now, jitter: 0.5) == [])
        #expect(life.tokens == fresh)
    }

    @Test("logout: revoke the refresh token, clear, publish, cancel the timer, generation bumped")
    func logout() {
        var life = loggedInLifecycle()
        #expect(life.loggedOut() == [.revoke("rt-1"), .clearStore, .publish, .scheduleRefresh(at: nil)])
        #expect(life.tokens == nil)
        #expect(life.generation == 2)
        #expect(life.status == AuthStatus(state: .loggedOut))
        #expect(life.refreshWanted(waiter: 1, now: now) == [.resolve([1], .notLoggedIn)])
    }

    @Test("logout during a refresh tells its waiters .notLoggedIn and ignores the late answer")
    func logoutDuringRefresh() {
        var life = loggedInLifecycle()
        _ = life.refreshWanted(waiter: 8, now: now)
        _ = life.refreshWanted(waiter: 9, now: now)
        #expect(
            life.loggedOut()
                == [.revoke("rt-1"), .clearStore, .publish, .scheduleRefresh(at: nil), .resolve([8, 9], .notLoggedIn)])
        #expect(life.refreshSucceeded(TokenSet(accessToken: "late", refreshToken: "rt-late")) == [])
        #expect(life.tokens == nil)
        #expect(life.status.state == .loggedOut)
    }

    @Test("logout without a refresh token revokes nothing; logout when logged out still clears")
    func logoutWithoutRefreshToken() {
        var life = loggedInLifecycle(TokenSet(accessToken: "at", expiresAt: lifecycleT0 + 60))
        #expect(life.loggedOut() == [.clearStore, .publish, .scheduleRefresh(at: nil)])
        #expect(life.loggedOut() == [.clearStore, .publish, .scheduleRefresh(at: nil)])
        #expect(life.generation == 3)
    }

    // MARK: status mapping

    @Test("status: refreshing with tokens is .refreshing and still logged in; refreshing with none is logged out")
    func statusWhileRefreshing() {
        var life = loggedInLifecycle()
        _ = life.refreshWanted(waiter: 1, now: now)
        #expect(life.status == AuthStatus(state: .refreshing, expiresAt: now + 3600, subject: "u1"))
        #expect(life.status.loggedIn)
        #expect(life.tokens == lifecycleLogin)

        var selfService = CredentialLifecycle(selfService: true, refreshBefore: lifecycleRefreshBefore)
        _ = selfService.started(with: nil, now: now)
        #expect(selfService.status == AuthStatus(state: .loggedOut))
    }

    @Test("status: backoff with tokens is .loggedIn with lastError; backoff without tokens is logged out")
    func statusInBackoff() {
        var life = loggedInLifecycle()
        _ = life.refreshWanted(waiter: 1, now: now)
        _ = life.refreshUnavailable("down", now: now, jitter: 0.5)
        #expect(life.status == AuthStatus(state: .loggedIn, expiresAt: now + 3600, subject: "u1", lastError: "down"))
        #expect(life.status.loggedIn)

        var selfService = CredentialLifecycle(selfService: true, refreshBefore: lifecycleRefreshBefore)
        _ = selfService.started(with: nil, now: now)
        _ = selfService.refreshUnavailable("down", now: now, jitter: 0.5)
        #expect(selfService.status == AuthStatus(state: .loggedOut, lastError: "down"))
        #expect(selfService.tokens == nil)
    }
}
