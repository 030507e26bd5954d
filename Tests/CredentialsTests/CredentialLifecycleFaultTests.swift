import Config
import JSON
import Testing

@testable import Credentials

@Suite("Credential lifecycle: a misbehaving IdP (expires_in 0, rotated then unusable, lost answers)")
struct CredentialLifecycleFaultTests {
    let now = lifecycleT0

    /// A lifecycle whose refresh at `now` brought a token that expires at once (`expires_in: 0`).
    private func expiredOnArrival() -> CredentialLifecycle {
        var life = loggedInLifecycle()
        _ = life.refreshWanted(waiter: nil, now: now)
        _ = life.refreshSucceeded(TokenSet(accessToken: "at-2", expiresAt: now), now: now)
        return life
    }

    @Test(
        "a token that expires on arrival: requests in the next second use it as is, then one refresh",
        arguments: [(0.0, false), (0.5, false), (0.999, false), (1.0, true), (5, true)])
    func expiredOnArrivalBound(age: Double, refreshes: Bool) {
        var life = expiredOnArrival()
        let actions = life.refreshWanted(waiter: 7, now: now + age)
        if refreshes {
            #expect(actions == [.startRefresh(refreshToken: "rt-1"), .publish])
        } else {
            #expect(actions == [.resolve([7], .ready)])
            #expect(life.status.state == .loggedIn)
        }
    }

    @Test("the proactive timer firing inside the second reschedules itself for when the second is over")
    func timerInsideTheSecond() {
        var life = expiredOnArrival()
        #expect(
            life.refreshWanted(waiter: nil, now: now + 0.2)
                == [.scheduleRefresh(at: now + CredentialLifecycle.minimumRefreshDelay)])
    }

    @Test("steady traffic against tokens that always expire on arrival: at most one refresh a second")
    func storm() {
        var life = expiredOnArrival()
        var starts = 0
        // 100 requests a second for 10 s; each refresh answers at once with another expired token.
        for tick in 1...1000 {
            let clock = now + Double(tick) / 100
            if life.refreshWanted(waiter: UInt64(tick), now: clock).contains(.startRefresh(refreshToken: "rt-1")) {
                starts += 1
                _ = life.refreshSucceeded(TokenSet(accessToken: "at-\(tick)", expiresAt: clock), now: clock)
            }
        }
        #expect(starts == 10)
    }

    @Test("an upstream 401 keeps its own bound (minRefreshInterval), not the one-second floor")
    func rejectedIsNotFloored() {
        var life = expiredOnArrival()
        #expect(life.rejected(waiter: 1, now: now + 0.1) == [.startRefresh(refreshToken: "rt-1"), .publish])
    }

    @Test("an unusable answer that rotated the refresh token: the rotated one is kept, stored and used next")
    func rotatedThenUnusable() {
        var life = loggedInLifecycle()
        _ = life.refreshWanted(waiter: 1, now: now)
        var kept = lifecycleLogin
        kept.refreshToken = "rt-2"
        #expect(
            life.refreshUnavailable("no access_token", now: now, jitter: 0.5, rotatedRefreshToken: "rt-2")
                == [
                    .persist(kept), .publish, .scheduleRetry(at: now + 1),
                    .resolve([1], .unavailable("no access_token")),
                ])
        #expect(life.tokens == kept)
        #expect(life.status.state == .loggedIn)
        #expect(life.retryDue(now: now + 1) == [.startRefresh(refreshToken: "rt-2"), .publish])
    }

    @Test("the same refresh token again, or a self-service grant, stores nothing")
    func rotatedNoChange() {
        var life = loggedInLifecycle()
        _ = life.refreshWanted(waiter: nil, now: now)
        #expect(
            life.refreshUnavailable("x", now: now, jitter: 0.5, rotatedRefreshToken: "rt-1")
                == [.publish, .scheduleRetry(at: now + 1)])
        var service = loggedInLifecycle(selfService: true)
        _ = service.refreshWanted(waiter: nil, now: now)
        #expect(
            service.refreshUnavailable("x", now: now, jitter: 0.5, rotatedRefreshToken: "rt-9")
                == [.publish, .scheduleRetry(at: now + 1)])
    }

    @Test(
        "invalid_grant after a refresh whose answer was lost: tokens kept, retried, reason published",
        arguments: [true, false])
    func refusalAfterLostAnswer(lost: Bool) {
        var life = loggedInLifecycle()
        _ = life.refreshWanted(waiter: nil, now: now)
        _ = life.refreshUnavailable("timeout", now: now, jitter: 0.5, answerLost: lost)
        #expect(life.answerLost == lost)
        _ = life.retryDue(now: now + 1)
        let actions = life.refreshRefused("invalid_grant", now: now + 1, jitter: 0.5)
        if lost {
            #expect(!actions.contains(.clearStore))
            #expect(actions.contains(.scheduleRetry(at: now + 3)))
            #expect(life.tokens == lifecycleLogin)
            #expect(life.status.state == .loggedIn)
            #expect(life.status.lastError?.hasPrefix("invalid_grant (an earlier refresh got no answer") == true)
        } else {
            #expect(actions.contains(.clearStore))
            #expect(life.status.state == .awaitingAuthorization)
        }
    }

    @Test("a second invalid_grant after a lost answer ends the login: the rotated token cannot come back")
    func secondRefusalAfterLostAnswer() {
        var life = loggedInLifecycle()
        _ = life.refreshWanted(waiter: nil, now: now)
        _ = life.refreshUnavailable("timeout", now: now, jitter: 0.5, answerLost: true)
        _ = life.retryDue(now: now + 1)
        #expect(!life.refreshRefused("invalid_grant", now: now + 1, jitter: 0.5).contains(.clearStore))
        #expect(!life.answerLost)
        _ = life.retryDue(now: now + 3)
        let actions = life.refreshRefused("invalid_grant", now: now + 3, jitter: 0.5)
        #expect(actions.contains(.clearStore))
        #expect(life.status.state == .awaitingAuthorization)
    }

    @Test("a successful refresh or a new login forgets the lost answer")
    func lostAnswerForgotten() {
        var life = loggedInLifecycle()
        _ = life.refreshWanted(waiter: nil, now: now)
        _ = life.refreshUnavailable("timeout", now: now, jitter: 0.5, answerLost: true)
        _ = life.retryDue(now: now + 1)
        _ = life.refreshSucceeded(TokenSet(accessToken: "at-2", expiresAt: now + 3600), now: now + 1)
        #expect(!life.answerLost)
        _ = life.refreshWanted(waiter: nil, now: now + 5)
        #expect(life.refreshRefused("invalid_grant", now: now + 5, jitter: 0.5).contains(.clearStore))
    }
}

@Suite("Refresh failures: only invalid_grant ends a login; tokens must fit in a header")
struct RefreshFailureClassificationTests {
    @Test(
        "grantIsDead",
        arguments: [
            (OAuthFailure.refused("invalid_grant"), true),
            (.refused("invalid_grant: refresh token revoked"), true),
            (.refused("invalid_grantee"), false),
            (.refused("invalid_client: bad secret"), false),
            (.refused("unauthorized_client"), false),
            (.unavailable("HTTP 404 without an OAuth error body"), false),
            (.unavailable("invalid_grant"), false),
        ])
    func grantIsDead(failure: OAuthFailure, dead: Bool) {
        #expect(failure.grantIsDead == dead)
    }

    @Test(
        "token responses whose tokens cannot go in a header are refused without naming them",
        arguments: [
            (["access_token": "secret at", "token_type": "Bearer"], "access_token that cannot be sent in a header"),
            (["access_token": "secret\u{e9}", "token_type": "Bearer"], "access_token that cannot be sent in a header"),
            (
                ["access_token": "secret\r\nX: 1", "token_type": "Bearer"],
                "access_token that cannot be sent in a header"
            ),
            (
                ["access_token": "ok", "token_type": "Bearer", "id_token": "secret id"],
                "id_token that cannot be sent in a header"
            ),
            (
                ["access_token": "ok", "token_type": "Bearer", "id_token": ""],
                "id_token that cannot be sent in a header"
            ),
        ] as [(JSONValue, String)])
    func unsendable(body: JSONValue, reason: String) {
        guard case .failure(let error) = TokenSet.fromTokenResponse(body, now: 0) else {
            Issue.record("accepted \(body.serialized())")
            return
        }
        #expect(error.description.contains(reason))
        #expect(!error.description.contains("secret"))
    }

    @Test(
        "a stored token that cannot go in a header is named in lastError, never shown",
        arguments: [
            (TokenSet(accessToken: "secret at"), "access token"),
            (TokenSet(accessToken: "ok", idToken: "secret\u{e9}"), "id_token"),
            (TokenSet(accessToken: "ok", tokenType: "Bear er"), "token type"),
        ])
    func storedUnsendable(tokens: TokenSet, named: String) {
        let problem = CredentialManager.unsendable(tokens)
        #expect(problem?.contains(named) == true)
        #expect(problem?.contains("secret") == false)
        #expect(CredentialManager.unsendable(TokenSet(accessToken: "fine")) == nil)
    }
}
