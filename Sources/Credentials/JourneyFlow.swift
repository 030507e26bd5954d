import JSON

/// One journey login as a value: `authenticating → awaiting(step) ⇄ polling → authorizing →
/// exchanging → finished`. Events in, actions out; `CredentialManager` sends the requests, waits
/// and stores the tokens. A 401 restarts the tree once so the app can answer again.
public struct JourneyFlow: Sendable {
    /// Work for the owner.
    public enum Action: Sendable, Equatable {
        /// Send this request to AM and report the answer with `answered`.
        case send(JourneyRequest)
        /// Wait this many seconds, then call `pollDue`.
        case wait(seconds: Double)
        /// Exchange this code at the token endpoint (PKCE verifier), then call `exchanged`.
        case exchange(code: String, verifier: String)
        /// Log in with these tokens (store, publish) and remember the AM session for logout.
        case loggedIn(TokenSet, session: String?)
        /// Tell the waiting app this node.
        case reply(JourneyNode)
    }

    /// An HTTP answer from AM, as the flow needs it.
    public struct Answer: Sendable, Equatable {
        /// Status code.
        public var status: Int
        /// The `Location` header, if any.
        public var location: String?
        /// The body.
        public var body: [UInt8]

        /// Creates an answer.
        public init(status: Int, location: String? = nil, body: [UInt8] = []) {
            self.status = status
            self.location = location
            self.body = body
        }
    }

    private enum State: Sendable, Equatable {
        case idle
        /// An authenticate request is out; `refusal` is set while the tree restarts after a 401.
        case authenticating(refusal: Refusal?)
        case awaiting(JourneyStep)
        /// Waiting to send a polling step back.
        case polling(JourneyStep)
        case authorizing(session: String)
        case exchanging(session: String)
        case finished
    }

    private struct Refusal: Sendable, Equatable {
        let message: String
        let body: JSONValue
    }

    private var state: State = .idle
    /// The requests' builder.
    public let client: JourneyClient
    /// The tree being walked.
    public let journey: String
    private let pkce: PKCE
    private let oauthState: String
    private let nonce: String
    /// Seconds the proxy polls on its own within one turn before handing the wait to the app.
    public static let pollBudget = 30.0
    /// Seconds waited for polling in the current turn.
    private var pollWaited = 0.0

    /// A flow for `journey`; PKCE, `state` and `nonce` are fresh per login (given, for tests).
    public init(client: JourneyClient, journey: String, pkce: PKCE, state: String, nonce: String) {
        self.client = client
        self.journey = journey
        self.pkce = pkce
        oauthState = state
        self.nonce = nonce
    }

    /// Whether the flow has ended (a success or failure was replied).
    public var isFinished: Bool { state == .finished }
    /// The step waiting for the app, if any.
    public var awaitingStep: JourneyStep? {
        if case .awaiting(let step) = state { return step }
        return nil
    }

    // MARK: events

    /// Starts the tree (or resumes a suspended one); `session` is an existing AM session, if any.
    public mutating func start(suspendedId: String? = nil, session: String? = nil) -> [Action] {
        guard state == .idle else { return [] }
        state = .authenticating(refusal: nil)
        let tree = suspendedId == nil ? journey : nil
        return [
            .send(
                client.authenticate(
                    journey: tree, body: .object(JSONObject()), suspendedId: suspendedId, session: session))
        ]
    }

    /// The app answered the waiting step.
    public mutating func answer(_ answers: JSONObject) -> Result<[Action], JourneyAnswerError> {
        guard case .awaiting(let step) = state else {
            return .failure(JourneyAnswerError(message: "This step is not waiting for answers."))
        }
        switch step.answered(answers) {
        case .failure(let error): return .failure(error)
        case .success(let body):
            state = .authenticating(refusal: nil)
            pollWaited = 0
            // A step with only a polling wait is sent back as is; a PollingWait given to the app
            // is answered with `{}` and the proxy resumes polling.
            return .success([.send(client.authenticate(journey: journey, body: body))])
        }
    }

    /// AM answered the request last sent (nil: it could not be reached, with why).
    public mutating func answered(_ result: Result<Answer, JourneyTransportError>) -> [Action] {
        switch state {
        case .authenticating(let refusal):
            let reply: JourneyReply
            switch result {
            case .failure(let error): reply = .failed(error.message)
            case .success(let answer): reply = JourneyReply.parse(status: answer.status, body: answer.body)
            }
            return authenticated(reply, refusal: refusal)
        case .authorizing(let session):
            guard case .success(let answer) = result else {
                if case .failure(let error) = result {
                    return finish(.failure("the authorize request failed: \(error.message)"))
                }
                return []
            }
            switch client.redirect(status: answer.status, location: answer.location, state: oauthState) {
            case .code(let code):
                state = .exchanging(session: session)
                return [.exchange(code: code, verifier: pkce.verifier)]
            case .refused(let reason): return finish(.failure("AM refused the authorization: \(reason)"))
            case .invalid(let reason): return finish(.failure(reason))
            }
        case .idle, .awaiting, .polling, .exchanging, .finished:
            return []
        }
    }

    /// The polling wait is over: send the step back as it is.
    public mutating func pollDue() -> [Action] {
        guard case .polling(let step) = state else { return [] }
        state = .authenticating(refusal: nil)
        return [.send(client.authenticate(journey: journey, body: .object(step.raw)))]
    }

    /// The token endpoint answered the code exchange.
    public mutating func exchanged(_ result: Result<TokenSet, OAuthFailure>) -> [Action] {
        guard case .exchanging(let session) = state else { return [] }
        switch result {
        case .success(let tokens):
            state = .finished
            return [.loggedIn(tokens, session: session), .reply(.success(tokens: true))]
        case .failure(let failure):
            return finish(.failure("the code exchange failed: \(failure.reason)"))
        }
    }

    // MARK: helpers

    private mutating func authenticated(_ reply: JourneyReply, refusal: Refusal?) -> [Action] {
        switch reply {
        case .step(let step):
            if let refusal {
                state = .awaiting(step)
                return [.reply(.error(message: refusal.message, body: refusal.body, retry: step))]
            }
            if step.isPollingOnly, let wait = step.pollingWaitMs, pollWaited < Self.pollBudget {
                // A wait is at most the whole budget: a huge or hostile value must neither hang
                // the flow nor overflow a deadline.
                let seconds = min(max(0.05, Double(wait) / 1000), Self.pollBudget)
                pollWaited += seconds
                state = .polling(step)
                return [.wait(seconds: seconds)]
            }
            state = .awaiting(step)
            return [.reply(.next(step))]
        case .success(let tokenId?):
            state = .authorizing(session: tokenId)
            return [.send(client.authorize(session: tokenId, pkce: pkce, state: oauthState, nonce: nonce))]
        case .success(nil):
            // noSession: the tree vouched for the user, but there is no session to get tokens with.
            state = .finished
            return [.reply(.success(tokens: false))]
        case .refused(let message, let body):
            if let refusal { return finish(.error(message: refusal.message, body: refusal.body, retry: nil)) }
            // AM ends the authentication session on a 401: start the tree again for the retry.
            state = .authenticating(refusal: Refusal(message: message, body: body))
            return [.send(client.authenticate(journey: journey, body: .object(JSONObject())))]
        case .failed(let cause):
            if let refusal { return finish(.error(message: refusal.message, body: refusal.body, retry: nil)) }
            return finish(.failure(cause))
        }
    }

    private mutating func finish(_ node: JourneyNode) -> [Action] {
        state = .finished
        return [.reply(node)]
    }
}

/// AM could not be reached (connect, TLS, timeout), in words.
public struct JourneyTransportError: Error, Sendable, Equatable {
    /// The reason (libcurl's message; never a header).
    public let message: String
    /// Creates one.
    public init(_ message: String) { self.message = message }
}
