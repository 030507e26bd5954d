import Config
import Credentials
import EventLoop
import HTTPServer
import JSON

extension ProxyHandler {
    /// `GET /_platform/login` with several providers: one browser flow through every
    /// authorization-code provider that is not logged in (docs/login.md, "Phased login").
    func startPhasedLogin(_ context: ExchangeContext) {
        let waiting = providerNames.filter { name in
            let slot = slot(name)
            return slot.manager?.grant == .authorizationCode && !slot.snapshot.status.loggedIn
        }
        guard !waiting.isEmpty else {
            let signedIn = providerNames.filter { slot($0).snapshot.status.loggedIn }
            let text =
                signedIn.isEmpty
                ? "No provider has a browser login (use platform-proxy login for device and journey logins)."
                : "Already signed in: \(signedIn.joined(separator: ", ")). You can close this window."
            return page(context, status: 200, title: "Signed in", text: text)
        }
        let (chain, action) = loginChains.startChain(waiting, now: UnixTime.now())
        Log.emit(.info, "phased_login_started", fields: [("providers", .string(waiting.joined(separator: ",")))])
        perform(action, chain: chain, context)
    }

    /// `GET /_platform/callback`: completes the login the `state` belongs to and, inside a
    /// phased login, sends the browser on to the next provider.
    func callback(_ context: ExchangeContext, query: [(String, String)]) {
        let state = query.first { $0.0 == "state" }?.1
        let bound = state.flatMap { loginChains.take(state: $0, now: UnixTime.now()) }
        // An unknown state still goes to a manager, which answers with the "start again" page.
        guard
            let manager = slot(bound?.provider).manager
                ?? providerNames.lazy.compactMap({ self.slot($0).manager }).first
        else {
            return fail(context, .loginUnavailable("No provider with a browser login is configured."))
        }
        manager.completeLogin(query: query, replyOn: loop) { [weak self, weak context] result in
            guard let self, let context else { return }
            guard let bound, let chain = bound.chain else {
                switch result {
                case .success:
                    let text =
                        self.severalProviders
                        ? "You are signed in to \(manager.name). You can close this window."
                        : "You are signed in. You can close this window."
                    self.page(context, status: 200, title: "Signed in", text: text)
                case .failure(let failure):
                    self.page(context, status: 400, title: "Sign-in failed", text: failure.message)
                }
                return
            }
            let outcome: PhasedLogin.Outcome
            switch result {
            case .success: outcome = .signedIn
            case .failure(let failure) where failure.code.map(PhasedLogin.interactionErrors.contains) == true:
                outcome = .interactionRequired
            case .failure(let failure) where failure.code != nil: outcome = .refused(failure.message)
            case .failure(let failure): outcome = .failed(failure.message)
            }
            self.perform(
                self.loginChains.completed(chain: chain, provider: bound.provider, outcome), chain: chain, context)
        }
    }

    /// Sends the browser at `context`'s exchange to `manager`'s authorization request (302), its `state`
    /// bound to `chain` (nil: a single login); `failed` gets the reason when none can be made.
    /// When the provider keeps as many unfinished logins as it may, the answer is 429 and the
    /// chain ends: a refused start must not linger in the table of chains either.
    func redirectToLogin(
        _ context: ExchangeContext, _ manager: CredentialManager, silent: Bool = false, chain: UInt64?,
        failed: @escaping (ProxyHandler, ExchangeContext, String) -> Void
    ) {
        let chains = loginChains
        let provider = manager.name
        // A start navigated to from another site takes a place only among those kept for such
        // starts; a phased login's next step (from the callback the IdP sent back) was admitted.
        // `same-site` is not another site: a local app's page on another port links here so.
        let crossSite =
            context.path == "/_platform/login"
            && RequestScreen.fields(context.exchange.head).fetchSite.map {
                $0.trimmingCharacters().lowercased() == "cross-site"
            } == true
        manager.loginURL(
            silent: silent, crossSite: crossSite,
            onState: { state in chains.bind(state: state, provider: provider, chain: chain, now: UnixTime.now()) },
            replyOn: loop
        ) { [weak self, weak context] result in
            guard let self, let context else { return }
            switch result {
            case .success(let url):
                self.send(context, status: 302, headers: [("Location", url), ("Cache-Control", "no-store")], body: [])
            case .failure(let failure) where failure.retryAfter != nil:
                if let chain { chains.abandon(chain: chain) }
                self.fail(context, .tooManyLogins(failure.message, retryAfterSeconds: failure.retryAfter ?? 0))
            case .failure(let failure):
                failed(self, context, failure.message)
            }
        }
    }

    /// Carries out one step of a phased login for the browser at `context`'s exchange.
    private func perform(_ action: PhasedLogin.Action, chain: UInt64, _ context: ExchangeContext) {
        switch action {
        case .authorize(let provider, let silent):
            guard let manager = slot(provider).manager else {
                return perform(
                    loginChains.completed(chain: chain, provider: provider, .failed("it has no login")), chain: chain,
                    context)
            }
            redirectToLogin(context, manager, silent: silent, chain: chain) { handler, context, reason in
                handler.perform(
                    handler.loginChains.completed(chain: chain, provider: provider, .failed(reason)), chain: chain,
                    context)
            }
        case .finish(let report):
            finishPhasedLogin(report, context)
        case .ignore:
            page(
                context, status: 400, title: "Sign-in failed",
                text: "The login could not be matched to one started here (unknown or expired state). Start again.")
        }
    }

    /// The chain's last page: who is signed in and who is not; also an SSE `login` event, so
    /// `platform-proxy login` learns the outcome of a provider that refused.
    private func finishPhasedLogin(_ report: PhasedLogin.Report, _ context: ExchangeContext) {
        let refused = report.notSignedIn.map { "\($0.provider) (\($0.reason))" }
        Log.emit(
            report.notSignedIn.isEmpty ? .info : .warning, "phased_login_finished",
            fields: [
                ("signedIn", .string(report.signedIn.joined(separator: ","))),
                ("notSignedIn", .string(report.notSignedIn.map(\.provider).joined(separator: ","))),
            ])
        var text =
            report.signedIn.isEmpty
            ? "No provider was signed in." : "Signed in: \(report.signedIn.joined(separator: ", "))."
        if !refused.isEmpty { text += " Not signed in: \(refused.joined(separator: "; "))." }
        // Journeys are walked in the terminal (or by the app), not in this browser flow.
        let journeys = runtime.configuration.providers.filter { named in
            named.configuration.grant == .journey && !slot(named.name).snapshot.status.loggedIn
        }.map(\.name)
        if !journeys.isEmpty {
            text += " Journey logins left: \(journeys.joined(separator: ", ")) (platform-proxy login)."
        }
        if report.signedIn.isEmpty {
            text += " Start again with /_platform/login."
        } else {
            text += " You can close this window."
        }
        page(
            context, status: report.signedIn.isEmpty ? 400 : 200,
            title: report.notSignedIn.isEmpty
                ? "Signed in" : report.signedIn.isEmpty ? "Sign-in failed" : "Partly signed in",
            text: text)
        var object = JSONObject()
        object["signedIn"] = .array(report.signedIn.map { .string($0) })
        var not = JSONObject()
        for refusal in report.notSignedIn { not[refusal.provider] = .string(refusal.reason) }
        object["notSignedIn"] = .object(not)
        loginChains.broadcast(JSONValue.object(object).serializedBytes())
    }

    /// A finished phased login's outcome for this loop's auth event streams.
    func loginOutcome(_ event: [UInt8]) { broadcastEvent("login", data: event) }
}
