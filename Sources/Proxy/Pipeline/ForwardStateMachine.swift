import Config
import Credentials
import Upstream

/// The lifecycle of one forwarded exchange as a value (the lifecycle convention): events from
/// the transfer, the client and the credential manager in, actions out; `ForwardedExchange`
/// only executes them. Model: async-http-client's `RequestBag.StateMachine`.
///
///     idle → sendingBody → awaitingHead → relaying → finished(relayed)
///                 ↘ (bodiless) ↗      ↘ discarding401 → awaitingRefreshAfter401 → sendingBody …
///                                     ↘ redirecting(decision) → sendingBody | awaitingHead …
///     any state → finished(clientGone | failed)
///     awaitingHead → (a stale pooled connection, once) → awaitingHead
///
/// The timeouts belong to the transfer (`UpstreamTransfer`): in `sendingBody` libcurl's
/// low-speed check is the stall timeout, and the head timeout runs from the last body byte
/// (`requestSent`); either ends the transfer with a timeout error, a 504 here.
struct ForwardStateMachine {
    enum State: Equatable {
        /// Made, nothing sent.
        case idle
        /// A hop's transfer is under way and its request body still flows upstream.
        case sendingBody
        /// The request was handed to libcurl whole; its response head is awaited.
        case awaitingHead
        /// A 401 on a request that may be retried: its body is dropped while the transfer ends.
        case discarding401
        /// The 401's transfer ended; the credential manager was asked for newer tokens.
        case awaitingRefreshAfter401
        /// A 3xx that is not relayed (`follow` or `tooManyRedirects`, never `relay`): its body
        /// is dropped while the transfer ends, then the decision is carried out.
        case redirecting(RedirectPolicy.Decision)
        /// The response head went to the client; its body streams.
        case relaying
        /// Nothing more happens.
        case finished(Outcome)
    }

    /// How the exchange ended.
    enum Outcome: Equatable {
        /// The upstream response was relayed whole.
        case relayed
        /// The proxy answered with an error, or (when bytes had already left) cut the response short.
        case failed(ProxyError)
        /// The client went away (or the server refused the rest of its request); the transfer was cancelled.
        case clientGone
    }

    /// Which send of the exchange is under way: the 401 retry happens at most once, on the first
    /// send only, and redirect hops are counted against the route's `max`.
    enum Leg: Equatable {
        case first
        case retriedAfter401
        case redirect(hop: Int)
    }

    /// Whether the hops still carry the injected credentials. Once a hop left the credential
    /// hosts the rest of the chain is stripped, or a foreign host could choose the path, method
    /// and body of a credentialed request.
    enum CredentialScope: Equatable {
        case carried
        case stripped
    }

    /// What a response head means.
    enum HeadAction: Equatable {
        /// Relay it to the client.
        case relay
        /// Drop it and its body (a 401 to retry, a redirect to follow).
        case discard
        /// Not expected in this state (the exchange already ended).
        case ignore
    }

    /// Work for `ForwardedExchange`.
    enum Action: Equatable {
        case none
        /// Send the first hop.
        case send
        /// Cancel the transfer under way.
        case cancelTransfer
        /// Ask the credential manager for newer tokens (after a 401).
        case refreshAfter401
        /// Send the same request again (the body replayed), with fresh credential lines when
        /// `refreshed`, else with the same ones.
        case resend(refreshed: Bool)
        /// Send the hop under way once more, as it was sent: its transfer failed on a pooled
        /// connection the upstream had closed (`UpstreamError.staleConnection`, logged).
        case resendHop(UpstreamError)
        /// Send the next redirect hop.
        case follow(url: UpstreamURL, method: String, keepsBody: Bool, credentials: CredentialScope)
        /// The relayed response is complete.
        case endResponse
        /// Answer with this error (nothing of the upstream response was relayed).
        case fail(ProxyError)
        /// Log the upstream failure, then answer with `answer` (nothing was relayed yet).
        case failUpstream(UpstreamError, answer: ProxyError)
        /// Log the upstream failure; the relayed response is taken back and replaced by `answer`
        /// when none of its bytes has left, else cut short after what was queued.
        case retractOrCut(UpstreamError, answer: ProxyError)
    }

    private(set) var state: State = .idle
    private(set) var leg: Leg = .first
    private(set) var credentials: CredentialScope = .carried
    /// Whether the hop under way sends a request body: the client's has one, and a redirect
    /// that changes the method to GET drops it. Request data, not lifecycle.
    private(set) var sendsBody: Bool
    /// Whether a hop was already sent again after a stale connection: once per exchange.
    private(set) var resentAfterStaleConnection = false

    init(hasBody: Bool) { sendsBody = hasBody }

    /// Redirects followed so far.
    var hops: Int {
        if case .redirect(let hop) = leg { return hop }
        return 0
    }

    /// Whether response body bytes go to the client (else they are dropped).
    var relaysBody: Bool {
        if case .relaying = state { return true }
        return false
    }

    /// Whether the exchange ended.
    var isFinished: Bool {
        if case .finished = state { return true }
        return false
    }

    // MARK: events

    /// The exchange starts: the first hop goes out.
    mutating func start() -> Action {
        guard case .idle = state else { return .none }
        state = sendsBody ? .sendingBody : .awaitingHead
        return .send
    }

    /// The request's last body byte was handed to libcurl: from now on the head timeout runs.
    mutating func requestSent() {
        if case .sendingBody = state { state = .awaitingHead }
    }

    /// A final response head arrived. `retryAfter401` says whether the route and body allow a
    /// refresh-and-retry and the tokens are old enough (asked only for a 401 on the first send);
    /// `redirect` decides a 3xx given the hops followed so far.
    mutating func receivedHead(
        status: Int, retryAfter401: () -> Bool,
        redirect: (_ hops: Int) -> RedirectPolicy.Decision
    ) -> HeadAction {
        switch state {
        case .sendingBody, .awaitingHead: break
        default: return .ignore
        }
        if status == 401 && leg == .first && retryAfter401() {
            state = .discarding401
            return .discard
        }
        if status >= 300 && status < 400 {
            let decision = redirect(hops)
            if decision != .relay {
                state = .redirecting(decision)
                return .discard
            }
        }
        // An early answer while the body still flows is relayed too; the upload goes on.
        state = .relaying
        return .relay
    }

    /// The transfer ended (`error` nil on success). `carriesCredentials` says whether a redirect
    /// target is a credential host for the current URL; `idempotent` whether the hop's method is
    /// (RFC 9110 §9.2.2), asked only when its connection turned out stale: a bodiless hop with
    /// an idempotent method is then sent once more rather than answered with a 502, as libcurl
    /// itself does for HTTP/1.1 (nothing came back; sending an idempotent request twice is safe).
    mutating func transferCompleted(
        _ error: UpstreamError?, carriesCredentials: (UpstreamURL) -> Bool,
        idempotent: () -> Bool = { false }
    ) -> Action {
        if let error, error.isCancelled { return .none }
        if let error, error.isStaleConnection, !resentAfterStaleConnection, !sendsBody, state == .awaitingHead,
            idempotent()
        {
            resentAfterStaleConnection = true
            return .resendHop(error)
        }
        switch state {
        case .idle, .awaitingRefreshAfter401, .finished:
            return .none
        case .relaying:
            guard let error else {
                state = .finished(.relayed)
                return .endResponse
            }
            let answer = Self.answer(error)
            state = .finished(.failed(answer))
            return .retractOrCut(error, answer: answer)
        case .sendingBody, .awaitingHead, .discarding401, .redirecting:
            if let error {
                let answer = Self.answer(error)
                state = .finished(.failed(answer))
                return .failUpstream(error, answer: answer)
            }
        }
        switch state {
        case .discarding401:
            state = .awaitingRefreshAfter401
            return .refreshAfter401
        case .redirecting(.follow(let url, let method, let keepsBody)):
            if credentials == .carried && !carriesCredentials(url) { credentials = .stripped }
            leg = .redirect(hop: hops + 1)
            sendsBody = keepsBody
            state = keepsBody ? .sendingBody : .awaitingHead
            return .follow(url: url, method: method, keepsBody: keepsBody, credentials: credentials)
        case .redirecting(.tooManyRedirects):
            state = .finished(.failed(.tooManyRedirects))
            return .fail(.tooManyRedirects)
        default:
            // The transfer reports a success only with a head (else "no response"), and
            // `redirecting(.relay)` is never entered: nothing usable came back.
            state = .finished(.failed(.upstreamUnreachable))
            return .fail(.upstreamUnreachable)
        }
    }

    /// The credential manager answered the refresh asked after a 401.
    mutating func refreshAnswered(_ outcome: CredentialLifecycle.Outcome) -> Action {
        guard case .awaitingRefreshAfter401 = state else { return .none }
        switch outcome {
        case .ready, .suppressed:
            // Suppressed: the tokens were too young to refresh; the 401 was dropped, so send once
            // more as is and relay what comes.
            leg = .retriedAfter401
            state = sendsBody ? .sendingBody : .awaitingHead
            return .resend(refreshed: outcome == .ready)
        case .unavailable(let reason):
            return finish(failing: .authServerUnavailable(reason))
        case .notLoggedIn:
            return finish(failing: .awaitingAuthorization)
        }
    }

    /// The send just decided cannot be made (no credential lines for the resend, no manager to
    /// refresh): no transfer is under way. Ignored where one is.
    mutating func couldNotSend(_ error: ProxyError) -> Action {
        switch state {
        case .idle, .sendingBody, .awaitingHead, .awaitingRefreshAfter401: return finish(failing: error)
        case .discarding401, .redirecting, .relaying, .finished: return .none
        }
    }

    /// The client went away, or the server refused the rest of its request.
    mutating func clientGone() -> Action {
        switch state {
        case .finished:
            return .none
        case .idle, .awaitingRefreshAfter401:
            state = .finished(.clientGone)
            return .none
        case .sendingBody, .awaitingHead, .discarding401, .redirecting, .relaying:
            state = .finished(.clientGone)
            return .cancelTransfer
        }
    }

    private mutating func finish(failing error: ProxyError) -> Action {
        state = .finished(.failed(error))
        return .fail(error)
    }

    private static func answer(_ error: UpstreamError) -> ProxyError {
        error.isTimeout ? .upstreamTimeout : error.isLoop ? .loopDetected : .upstreamUnreachable
    }
}
