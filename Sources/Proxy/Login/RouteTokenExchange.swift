import Config
import Credentials
import EventLoop
import HTTPServer
import Upstream

/// The injected lines of each token-exchange route (RFC 8693) on one loop: the route's own
/// exchanged token, never its provider's, formatted once per token. A miss asks the provider's
/// manager, which exchanges once for every loop.
struct ExchangedLineCache {
    private struct Entry {
        let token: ExchangedToken
        let lines: InjectedLines
        /// The token's bytes, never written to a recorded mock, and their masker for echoes.
        let bytes: [UInt8]
        let masker: EchoMasker?
        /// Just received from the manager: used once even if already stale by this loop's
        /// clock (a token issued with a tiny lifetime would otherwise be asked for forever).
        var fresh: Bool
    }
    // Held, not just identified: a freed runtime's address could come back as a new one's.
    private var runtime: ProxyRuntime?
    private var entries: [Int: Entry] = [:]

    /// The lines of `plan`'s route for subject tokens of `generation`, or nil when they must be fetched.
    mutating func lines(_ plan: ForwardPlan, generation: UInt64, now: Double) -> InjectedLines? {
        if runtime !== plan.runtime {
            runtime = plan.runtime
            entries.removeAll()
        }
        guard var entry = entries[plan.routeIndex] else { return nil }
        if entry.fresh {
            // The answer to this request's own ask: used for it even when its subject token is
            // not (or no longer) the one this loop has, which would otherwise ask again at once.
            entry.fresh = false
            entries[plan.routeIndex] = entry
            return entry.lines
        }
        guard entry.token.generation == generation else { return nil }
        return entry.token.isStale(now: now) ? nil : entry.lines
    }

    /// Keeps `token` for `plan`'s route and returns its lines.
    mutating func store(_ token: ExchangedToken, for plan: ForwardPlan) {
        if runtime !== plan.runtime {
            runtime = plan.runtime
            entries.removeAll()
        }
        var lines = HeaderLines()
        let value = token.tokenType + " " + token.value
        for name in plan.compiled.config.headers { lines.append(name: name.utf8, value: value.utf8) }
        let bytes = Array(token.value.utf8)
        entries[plan.routeIndex] = Entry(
            token: token, lines: InjectedLines(lines), bytes: bytes,
            masker: EchoMasker(token: bytes), fresh: true)
    }

    /// The masker of the token `lines` last returned for `plan`'s route (echoes of it are masked
    /// like those of any injected token).
    func masker(_ plan: ForwardPlan) -> EchoMasker? { entries[plan.routeIndex]?.masker }

    /// The bytes of the token `lines` last returned for `plan`'s route.
    func bytes(_ plan: ForwardPlan) -> [UInt8]? { entries[plan.routeIndex]?.bytes }

    /// Forgets every token (a logout or new subject token makes them useless).
    mutating func removeAll() { entries.removeAll() }
}

extension ProxyHandler {
    /// The lines of a token-exchange route: cached, or nil after asking the provider's manager
    /// for the exchange (the request is forwarded again when it answers, or answered with an
    /// error: a refused exchange never falls back to the provider's own token).
    func exchangedLines(
        _ context: ExchangeContext, _ plan: ForwardPlan, target: TokenExchangeConfiguration,
        credentials: CredentialSnapshot, refreshed: Bool
    ) -> InjectedLines? {
        let slot = plan.slot.provider
        if let lines = slot.exchangedLines.lines(plan, generation: credentials.generation, now: UnixTime.now()) {
            return lines
        }
        guard let manager = slot.manager else {
            fail(context, .credentialsUnavailable(plan.route.object.config.credential.rawValue))
            return nil
        }
        context.exchange.pauseBody()
        manager.exchangedToken(for: target, replyOn: loop) { [weak self, weak context] outcome in
            guard let self, let context, !context.exchange.isAborted else { return }
            switch outcome {
            case .token(let token):
                slot.exchangedLines.store(token, for: plan)
                self.forward(context, plan, refreshed: refreshed)
            case .notLoggedIn: self.fail(context, self.awaitingAuthorization(for: plan.route.object.config))
            case .refused(let reason): self.fail(context, .tokenExchangeRefused(reason))
            case .unavailable(let reason): self.fail(context, .authServerUnreachable(reason))
            }
        }
        return nil
    }
}
