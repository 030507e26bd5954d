import Config
import EventLoop
import JSON
import Upstream

/// The outcome of one journey request, for the HTTP endpoint or the CLI.
public enum JourneyTurn: Sendable {
    /// A node for the app (`continue`, `error`, `failure`, `success`).
    case node(JSONValue)
    /// The step id is unknown, spent, expired or another client's.
    case unknownStep
    /// The answers do not fit the step.
    case invalidAnswers(String)
    /// This provider has no journey login, or it is not usable yet.
    case unavailable(String)
}

/// The journeys in progress on the manager's loop.
final class JourneyState {
    /// A flow with the app request waiting for its next node.
    struct Entry {
        var flow: JourneyFlow
        let client: String
        var waiter: ((JourneyTurn) -> Void)?
    }

    var flows: [JourneySteps.FlowID: Entry] = [:]
    var steps = JourneySteps(lifetime: 300, capacity: 64)
    var nextFlow: JourneySteps.FlowID = 1
    /// The AM session behind the current login (nil: none, or not read from disk yet).
    var session: String?
    /// Whether `session` was read from disk (it is, before the first journey after a start).
    var sessionLoaded = false
    /// Reports progress (one JSON object per event) to the auth event streams.
    var progress: (@Sendable ([UInt8]) -> Void)?
}

extension CredentialManager {
    /// Where journey progress goes (the auth event streams of every loop).
    public func onJourneyProgress(_ report: @escaping @Sendable ([UInt8]) -> Void) {
        loop.execute { [self] in journeys.progress = report }
    }

    /// Starts `journey` (the configured one when nil), or resumes a suspended one from the
    /// "magic link" `resume`; `client` binds the step ids to the caller.
    public func startJourney(
        _ journey: String?, resume: String?, client: String, replyOn caller: EventLoop,
        _ done: @escaping (JourneyTurn) -> Void
    ) {
        let done = LoopBound(done, on: caller)
        loop.execute { [self] in
            // After a restart the AM session is on disk: read it (on the worker) before the first
            // journey, so AM sees it and a later logout ends the right one.
            guard journeys.sessionLoaded else {
                let store = JourneySessionStore(directory: self.store.directory, name: self.store.journeySessionName)
                worker.submit { [self] in
                    let stored = store.load()
                    loop.execute { [self] in
                        if !journeys.sessionLoaded { journeys.session = journeys.session ?? stored }
                        journeys.sessionLoaded = true
                        startJourney(journey, resume: resume, client: client, replyOn: caller) { turn in
                            done.value(turn)
                        }
                    }
                }
                return
            }
            let reply: (JourneyTurn) -> Void = { turn in
                let sendable = LoopBound(turn, on: caller); caller.execute { done.value(sendable.value) }
            }
            guard let config = provider.journey, let clientID = provider.clientID, let redirect = provider.redirectURI
            else {
                return reply(
                    .unavailable(
                        "The \(provider.grant.rawValue) grant has no journey login (provider.grant \"journey\")."))
            }
            guard let authorize = oauth.endpoints.authorization else {
                return reply(.unavailable(providerProblem ?? "the provider has no authorization endpoint"))
            }
            var suspendedId: String?
            if let resume {
                guard let id = Self.suspendedId(in: resume) else {
                    return reply(.invalidAnswers("The resume URL has no suspendedId parameter."))
                }
                suspendedId = id
            }
            let name = journey ?? config.journey
            guard config.allows(name) else {
                return reply(
                    .invalidAnswers(
                        "The journey \"\(name)\" is not one this proxy starts (provider.journey.journey "
                            + "or provider.journey.allowedJourneys)."))
            }
            let amClient = JourneyClient(
                config: config, clientID: clientID, redirectURI: redirect.description,
                scopes: provider.scopes, authorizeURL: authorize)
            var flow = JourneyFlow(
                client: amClient, journey: name, pkce: PKCE.generate(), state: randomToken(), nonce: randomToken())
            let id = journeys.nextFlow
            journeys.nextFlow += 1
            let actions = flow.start(suspendedId: suspendedId, session: journeys.session)
            journeys.flows[id] = JourneyState.Entry(flow: flow, client: client, waiter: reply)
            emit(.info, "journey_started", ["journey": .string(name), "resumed": .bool(resume != nil)])
            report(["journey": .string(name), "node": "started"])
            performJourney(id, actions)
        }
    }

    /// Answers the step `step` with `answers` (input name → value).
    public func continueJourney(
        step: String, answers: JSONObject, client: String, replyOn caller: EventLoop,
        _ done: @escaping (JourneyTurn) -> Void
    ) {
        let done = LoopBound(done, on: caller)
        let answers = LoopBound(answers, on: loop)
        loop.execute { [self] in
            let reply: (JourneyTurn) -> Void = { turn in
                let sendable = LoopBound(turn, on: caller); caller.execute { done.value(sendable.value) }
            }
            expireJourneys()
            guard let id = journeys.steps.take(step, client: client, now: UnixTime.now()),
                var entry = journeys.flows[id], entry.waiter == nil
            else { return reply(.unknownStep) }
            switch entry.flow.answer(answers.value) {
            case .failure(let error):
                // The step stays answerable: the app may correct its answers.
                journeys.steps.issue(step, flow: id, client: entry.client, now: UnixTime.now()).forEach(dropJourney)
                reply(.invalidAnswers(error.message))
            case .success(let actions):
                entry.waiter = reply
                journeys.flows[id] = entry
                performJourney(id, actions)
            }
        }
    }

    private func performJourney(_ id: JourneySteps.FlowID, _ actions: [JourneyFlow.Action]) {
        for (index, action) in actions.enumerated() {
            guard let entry = journeys.flows[id] else { return }
            let name = entry.flow.journey
            switch action {
            case .send(let request):
                sendToAM(request, timeout: entry.flow.client.config.timeoutSeconds) { [self] result in
                    guard var current = journeys.flows[id] else { return }
                    let next = current.flow.answered(result)
                    journeys.flows[id] = current
                    performJourney(id, next)
                }
            case .wait(let seconds):
                report(["journey": .string(name), "node": "polling", "waitSeconds": .number(JSONNumber(seconds))])
                loop.schedule(at: loop.now.adding(seconds: seconds)) { [self] in
                    guard var current = journeys.flows[id] else { return }
                    let next = current.flow.pollDue()
                    journeys.flows[id] = current
                    performJourney(id, next)
                }
            case .exchange(let code, let verifier):
                oauth.exchangeCode(code, verifier: verifier, redirectURI: entry.flow.client.redirectURI) {
                    [self] result in
                    guard var current = journeys.flows[id] else { return }
                    let next = current.flow.exchanged(result)
                    journeys.flows[id] = current
                    performJourney(id, next)
                }
            case .loggedIn(let tokens, let session):
                emit(.info, "logged_in", ["grant": .string("journey"), "journey": .string(name)])
                journeys.session = session
                if let session {
                    let store = JourneySessionStore(
                        directory: self.store.directory, name: self.store.journeySessionName)
                    worker.submit {
                        do { try store.save(session) } catch {
                            self.emit(.error, "journey_session_store_failed", ["error": .string("\(error)")])
                        }
                    }
                }
                let rest = Array(actions[(index + 1)...])
                return perform(lifecycle.loggedIn(tokens)) { [self] in performJourney(id, rest) }
            case .reply(let node):
                replyJourney(id, node)
            }
        }
    }

    private func replyJourney(_ id: JourneySteps.FlowID, _ node: JourneyNode) {
        guard var entry = journeys.flows[id] else { return }
        let name = entry.flow.journey
        var step: String?
        if node.answerable != nil {
            let fresh = randomToken()
            journeys.steps.issue(fresh, flow: id, client: entry.client, now: UnixTime.now()).filter { $0 != id }
                .forEach(dropJourney)
            step = fresh
        }
        let json = node.json(journey: name, step: step, user: lifecycle.tokens?.subject)
        var event: [String: JSONValue] = ["journey": .string(name), "node": .string(node.kind)]
        if let stage = node.answerable?.stage { event["stage"] = .string(stage) }
        switch node {
        case .failure(let cause): emit(.warning, "journey_failed", ["journey": .string(name), "cause": .string(cause)])
        case .error(let message, _, _):
            emit(.info, "journey_error_node", ["journey": .string(name), "message": .string(message)])
        default: break
        }
        report(event)
        let waiter = entry.waiter
        entry.waiter = nil
        if entry.flow.isFinished { journeys.flows.removeValue(forKey: id) } else { journeys.flows[id] = entry }
        waiter?(.node(json))
    }

    /// Logout: every journey in progress ends here, so no step answered later (nor an AM reply
    /// already on its way) can sign the user back in. Waiting apps hear that it ended.
    func abandonJourneys() {
        journeys.steps.removeAll()
        let waiting = journeys.flows.values.compactMap(\.waiter)
        journeys.flows.removeAll()
        for waiter in waiting { waiter(.unavailable("The journey ended: the user signed out.")) }
    }

    private func dropJourney(_ id: JourneySteps.FlowID) {
        if journeys.flows[id]?.waiter == nil { journeys.flows.removeValue(forKey: id) }
    }

    private func expireJourneys() {
        journeys.steps.expire(now: UnixTime.now()).forEach(dropJourney)
    }

    private func report(_ fields: [String: JSONValue]) {
        var object = JSONObject()
        for key in fields.keys.sorted() { object[key] = fields[key] }
        object["provider"] = .string(name)
        journeys.progress?(JSONValue.object(object).serializedBytes())
    }

    /// Sends one AM request through the loop's libcurl client; the answer comes back on the loop.
    func sendToAM(
        _ request: JourneyRequest, timeout: Double,
        _ done: @escaping (Result<JourneyFlow.Answer, JourneyTransportError>) -> Void
    ) {
        let upstream = UpstreamRequest(
            method: request.method, url: request.url, headers: request.headers,
            hasBody: request.body != nil, bodyLength: request.body?.count, timeout: timeout)
        http.fetch(upstream, body: request.body) { result in
            switch result {
            case .success(let response):
                done(
                    .success(
                        JourneyFlow.Answer(
                            status: response.status, location: response.first("Location"), body: response.body)))
            case .failure(let error):
                done(.failure(JourneyTransportError(error.detail)))
            }
        }
    }

    /// Ends the AM session behind the login (read from disk after a restart), then calls `then`.
    func endJourneySession(_ then: @escaping () -> Void) {
        guard let config = provider.journey, let clientID = provider.clientID, let redirect = provider.redirectURI,
            let authorize = oauth.endpoints.authorization
        else { return then() }
        let store = JourneySessionStore(directory: self.store.directory, name: self.store.journeySessionName)
        let known = journeys.session
        journeys.session = nil
        // The file goes below: nothing is left to read from disk.
        journeys.sessionLoaded = true
        let then = LoopBound(then, on: loop)
        worker.submit { [self] in
            let session = known ?? store.load()
            do { try store.delete() } catch {
                emit(.error, "journey_session_store_failed", ["error": .string("\(error)")])
            }
            loop.execute { [self] in
                guard let session else { return then.value() }
                let client = JourneyClient(
                    config: config, clientID: clientID, redirectURI: redirect.description,
                    scopes: provider.scopes, authorizeURL: authorize)
                sendToAM(client.logout(session: session), timeout: config.timeoutSeconds) { result in
                    let ended = (try? result.get()).map { (200...299).contains($0.status) } ?? false
                    self.emit(ended ? .info : .warning, "journey_session_ended", ["accepted": .bool(ended)])
                    then.value()
                }
            }
        }
    }

    /// The `suspendedId` query parameter of a resume link.
    static func suspendedId(in url: String) -> String? {
        guard let query = url.split(separator: "?", maxSplits: 1).dropFirst().first else { return nil }
        let value = FormEncoding.decodeQuery(query.split(separator: "#").first ?? "").first { $0.0 == "suspendedId" }?.1
        return value.flatMap { $0.isEmpty ? nil : $0 }
    }
}
