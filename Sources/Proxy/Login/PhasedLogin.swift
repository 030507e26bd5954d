/// One browser flow over several providers (`GET /_platform/login` without `provider`): the
/// first provider asks the user; each next one is tried with `prompt=none` first, so the
/// identity provider's session cookie signs it in silently, and asked interactively only when
/// it answers `login_required` (or another "needs the user" error). A refusal of one
/// provider is recorded and the chain moves on. A value: events in, actions out.
public struct PhasedLogin: Sendable, Equatable {
    /// How one provider's authorization request came back.
    public enum Outcome: Sendable, Equatable {
        /// The code was exchanged: the provider is signed in.
        case signedIn
        /// A silent attempt needs the user (`login_required`, `interaction_required`, …).
        case interactionRequired
        /// The authorization server refused (`access_denied`, …), with its words.
        case refused(String)
        /// Anything else went wrong (code exchange, unreachable server), with the reason.
        case failed(String)
    }

    /// Who is signed in and who is not, in chain order.
    public struct Report: Sendable, Equatable {
        /// Providers signed in by this chain.
        public var signedIn: [String] = []
        /// Providers that refused or failed, with the reason.
        public var notSignedIn: [Refusal] = []
        /// A provider that was not signed in, and why.
        public struct Refusal: Sendable, Equatable {
            public var provider: String
            public var reason: String
        }
    }

    /// Where the chain is.
    public enum State: Sendable, Equatable {
        /// Created, not started.
        case ready(providers: [String])
        /// The browser is at `provider`'s authorization endpoint (silently or not); `rest` follow.
        case authorizing(provider: String, silent: Bool, rest: [String], report: Report)
        /// Every provider had its turn.
        case finished(Report)
    }

    /// What the caller does next.
    public enum Action: Sendable, Equatable {
        /// Redirect the browser to `provider`'s authorization request (`prompt=none` when silent).
        case authorize(provider: String, silent: Bool)
        /// Show the report: the chain is over.
        case finish(Report)
        /// The event does not belong to this chain's current step: answer it as a stray callback.
        case ignore
    }

    /// Errors of a `prompt=none` request that mean "ask the user" (OIDC Core §3.1.2.6).
    public static let interactionErrors: Set<String> = [
        "login_required", "interaction_required", "consent_required", "account_selection_required",
    ]

    /// The current state.
    public private(set) var state: State

    /// A chain over `providers`, in that order.
    public init(providers: [String]) { state = .ready(providers: providers) }

    /// Starts: the first provider is asked interactively (there is no session to reuse yet).
    public mutating func start() -> Action {
        guard case .ready(let providers) = state else { return .ignore }
        return next(providers, report: Report(), silent: false)
    }

    /// `provider`'s authorization request came back with `outcome`.
    public mutating func completed(_ provider: String, _ outcome: Outcome) -> Action {
        guard case .authorizing(let current, let silent, let rest, var report) = state, current == provider else {
            return .ignore
        }
        switch outcome {
        case .signedIn:
            report.signedIn.append(provider)
        case .interactionRequired where silent:
            state = .authorizing(provider: provider, silent: false, rest: rest, report: report)
            return .authorize(provider: provider, silent: false)
        case .interactionRequired:
            report.notSignedIn.append(
                .init(provider: provider, reason: "the authorization server still asked for a login"))
        case .refused(let reason), .failed(let reason):
            report.notSignedIn.append(.init(provider: provider, reason: reason))
        }
        return next(rest, report: report, silent: true)
    }

    /// `provider`'s authorization request could not even be made (no endpoint yet, …).
    public mutating func couldNotAuthorize(_ provider: String, reason: String) -> Action {
        completed(provider, .failed(reason))
    }

    private mutating func next(_ providers: [String], report: Report, silent: Bool) -> Action {
        guard let first = providers.first else {
            state = .finished(report)
            return .finish(report)
        }
        state = .authorizing(provider: first, silent: silent, rest: Array(providers.dropFirst()), report: report)
        return .authorize(provider: first, silent: silent)
    }
}
