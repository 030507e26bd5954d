import Config
import Credentials
import EventLoop
import HTTPServer
import JSON

extension ProxyHandler {
    private static let journeyJSON: [(name: String, value: String)] = [
        ("Content-Type", "application/json"), ("Cache-Control", "no-store"),
    ]
    /// Largest journey request body (answers are small).
    static let maxJourneyBody = 65536

    /// `POST /_platform/login/journey` (start or resume) and `POST /_platform/login/journey/{step}`
    /// (answer a step); false when `path` is neither.
    func handleJourneyEndpoint(_ context: ExchangeContext, path: Substring) -> Bool {
        let prefix = "/_platform/login/journey"
        guard path.hasPrefix(prefix) else { return false }
        let rest = path.dropFirst(prefix.count)
        guard rest.isEmpty || rest.hasPrefix("/") else { return false }
        // `?provider=<name>` picks one of several journey providers; else the default one if it
        // is a journey, else the only journey provider.
        let journeys = runtime.configuration.providers.filter { $0.configuration.grant == .journey }
        let query = FormEncoding.decodeQuery(RequestTarget(context.exchange.head.target).query ?? "")
        let chosen: NamedProvider?
        if let name = query.first(where: { $0.0 == "provider" })?.1 {
            guard let found = runtime.configuration.provider(named: name) else {
                fail(context, .unknownProvider(name, known: providerNames))
                return true
            }
            chosen = found
        } else if let fallback = runtime.configuration.defaultProvider, fallback.configuration.grant == .journey {
            chosen = fallback
        } else {
            chosen = journeys.count == 1 ? journeys[0] : nil
        }
        guard let chosen, chosen.configuration.grant == .journey, let manager = slot(chosen.name).manager else {
            fail(context, .loginUnavailable("No journey login is configured (provider.grant \"journey\")."))
            return true
        }
        let step = rest.dropFirst()
        // Bound to the caller: a step id alone is not enough to continue someone else's login.
        let exchange = context.exchange
        let client = [exchange.peer, exchange.head.first("User-Agent") ?? "", exchange.head.first("Origin") ?? ""]
            .joined(separator: "\n")
        collectBody(context, limit: Self.maxJourneyBody) { [weak self, weak context] body in
            guard let self, let context else { return }
            let parsed: JSONObject
            if body.allSatisfy({ $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }) {
                parsed = JSONObject()
            } else if let object = (try? JSONValue.parse(body))?.objectValue {
                parsed = object
            } else {
                return self.fail(context, .invalidRequest("The body must be a JSON object."))
            }
            let reply: (JourneyTurn) -> Void = { [weak self, weak context] turn in
                guard let self, let context else { return }
                self.journeyReply(context, turn)
            }
            if rest.isEmpty || step.isEmpty && rest == "/" {
                self.startJourney(context, parsed, manager: manager, client: client, reply: reply)
            } else {
                guard !step.contains("/") else { return self.fail(context, .journeyStepUnknown) }
                guard let answers = parsed["answers"]?.objectValue else {
                    return self.fail(
                        context,
                        .invalidRequest(
                            "Answer a step with {\"answers\": {\"<input name>\": value, …}}, keyed by the names of the step's callback inputs."
                        ))
                }
                manager.continueJourney(step: String(step), answers: answers, client: client, replyOn: self.loop, reply)
            }
        }
        return true
    }

    private func startJourney(
        _ context: ExchangeContext, _ body: JSONObject, manager: CredentialManager, client: String,
        reply: @escaping (JourneyTurn) -> Void
    ) {
        for key in body.keys where !["journey", "resume"].contains(key) {
            return fail(
                context,
                .invalidRequest(
                    "Unknown key \"\(key)\": start with {\"journey\": name} or {\"resume\": url}, or no body."))
        }
        var journey: String?
        if let value = body["journey"], !value.isNull {
            guard let name = value.stringValue, JourneyConfiguration.isPlainName(name) else {
                return fail(
                    context, .invalidRequest("\"journey\" must be a tree name (letters, digits, \"-\", \"_\", \".\")."))
            }
            journey = name
        }
        var resume: String?
        if let value = body["resume"], !value.isNull {
            guard let url = value.stringValue else {
                return fail(context, .invalidRequest("\"resume\" must be the resume link (a URL with suspendedId)."))
            }
            resume = url
        }
        manager.startJourney(journey, resume: resume, client: client, replyOn: loop, reply)
    }

    private func journeyReply(_ context: ExchangeContext, _ turn: JourneyTurn) {
        switch turn {
        case .node(let node):
            // A failure is the only node where nothing was decided by the server: a gateway error.
            let status = node["node"] == "failure" ? 502 : 200
            send(context, status: status, headers: Self.journeyJSON, body: node.serializedBytes())
        case .unknownStep: fail(context, .journeyStepUnknown)
        case .invalidAnswers(let message): fail(context, .invalidRequest(message))
        case .unavailable(let message): fail(context, .loginUnavailable(message))
        }
    }

    /// A journey progress event for this loop's auth event streams.
    func journeyProgress(_ event: [UInt8]) { broadcastEvent("journey", data: event) }
}
