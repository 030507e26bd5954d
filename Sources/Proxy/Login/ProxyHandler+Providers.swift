import Analytics
import Config
import Credentials
import EventLoop
import HTTPServer

/// The handler's providers on this loop: each one's slot, its token changes, its gate, and
/// whether all of them are ready.
extension ProxyHandler {
    /// The slot of the provider named `name`; nil means the default provider.
    func slot(_ name: String?) -> ProviderSlot {
        let key = name ?? runtime.defaultProviderName
        if let slot = slots[key] { return slot }
        let created = ProviderSlot(name: key)
        slots[key] = created
        return created
    }

    /// The tokens `route` is sent with (its provider's snapshot).
    func snapshot(for route: RouteConfiguration) -> CredentialSnapshot { slot(route.provider).snapshot }
    /// The token lifecycle of `route`'s provider; nil for a static provider.
    func manager(for route: RouteConfiguration) -> CredentialManager? { slot(route.provider).manager }

    /// The 401 for `route` while its provider has no login (naming it when there are several).
    func awaitingAuthorization(for route: RouteConfiguration) -> ProxyError {
        severalProviders ? .awaitingAuthorization(provider: slot(route.provider).name) : .awaitingAuthorization
    }

    /// The configured provider names in config order.
    var providerNames: [String] { runtime.configuration.providers.map(\.name) }

    /// Whether several providers are configured (answers then name them).
    var severalProviders: Bool { runtime.configuration.providers.count > 1 }

    /// New tokens or a new login state of `provider` (nil: the default), sent by whoever owns
    /// the tokens (its manager or the file watcher).
    public func credentialsChanged(_ snapshot: CredentialSnapshot, provider: String? = nil) {
        let slot = slot(provider)
        let previous = slot.snapshot.status
        // This loop's own object (the same tokens): requests retain it, and no other core does.
        let snapshot = snapshot.privateCopy()
        slot.snapshot = snapshot
        if uploadsHere, slot.name == analyticsProviderName { analytics?.credentialsChanged(UploadToken(snapshot)) }
        if snapshot.status != previous { broadcastState(slot) }
        if previous.loggedIn && !snapshot.status.loggedIn { withdrawTunnels(provider: slot.name, reason: "logout") }
        withdrawRefusedTunnels(provider: slot.name, generation: snapshot.generation)
        if snapshot.status.loggedIn && !slot.gated.isEmpty {
            let released = slot.gated
            slot.gated.removeAll()
            for request in released {
                loop.cancel(request.timer)
                request.resume()
            }
        }
    }

    /// The provider whose tokens analytics uses (its subject attributes events).
    var analyticsProviderName: String {
        runtime.configuration.analytics?.provider ?? runtime.configuration.defaultProvider?.name
            ?? NamedProvider.defaultName
    }

    /// The snapshot analytics attributes events with.
    var analyticsCredentials: CredentialSnapshot { slot(analyticsProviderName).snapshot }

    /// The awaiting-authorization gate of `slot`'s provider: `reject` answers 401 at once;
    /// `wait` holds the request (its body stays in the socket) until that provider's login or `waitSeconds`.
    func gate(_ context: ExchangeContext, slot: ProviderSlot, resume: @escaping () -> Void) {
        let gate = runtime.configuration.gate
        metrics.gateRejected(route: context.route ?? "", provider: slot.name)
        let refusal: ProxyError =
            severalProviders ? .awaitingAuthorization(provider: slot.name) : .awaitingAuthorization
        guard gate.mode == .wait, gate.waitSeconds > 0 else { return fail(context, refusal) }
        context.exchange.pauseBody()
        let timer = loop.schedule(at: loop.now.adding(seconds: gate.waitSeconds)) {
            [weak self, weak context, weak slot] in
            guard let self, let context else { return }
            slot?.gated.removeAll { $0.context === context }
            self.fail(context, refusal)
        }
        slot.gated.append(GatedRequest(context: context, resume: resume, timer: timer))
    }

    /// Stopping: event streams end (their clients reconnect elsewhere), held requests get 503.
    public func shutdown() {
        endEventStreams()
        withdrawAllTunnels()
        for slot in slots.values {
            let held = slot.gated
            slot.gated.removeAll()
            for request in held {
                loop.cancel(request.timer)
                if let context = request.context { fail(context, .shuttingDown) }
            }
        }
    }

    /// Why `/_platform/ready` is not 200, or nil: every provider must be usable and logged in.
    func unreadyReason() -> String? {
        for named in runtime.configuration.providers {
            let prefix = severalProviders ? "provider \(named.name): " : ""
            if named.configuration.grant == .staticTokens {
                if let reason = runtime.unreadyReason(named.configuration) { return prefix + reason }
                continue
            }
            let snapshot = slot(named.name).snapshot
            // The details (URLs, the IdP's words) are in the log; probes get no more than this.
            if snapshot.providerProblem != nil {
                return prefix
                    + "the identity provider is not usable yet (its discovery or endpoints failed; the log has the details)"
            }
            guard snapshot.status.loggedIn else {
                return prefix + "not logged in (state \(snapshot.status.state.rawValue))"
            }
            if snapshot.accessTokenValue == nil {
                return prefix
                    + "the identity provider's token cannot be sent in a header (lastError in /_platform/auth says why)"
            }
        }
        return nil
    }
}
