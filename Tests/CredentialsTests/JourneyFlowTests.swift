import JSON
import Testing

@testable import Credentials

/// One event fed to a flow under test.
enum JourneyEvent: Sendable, CustomStringConvertible {
    case start
    case resume(String)
    case answer(String)
    case am(Int, String)
    case redirect(String)
    case down
    case pollDue
    case tokens
    case tokensRefused

    var description: String {
        switch self {
        case .start: "start"
        case .resume(let id): "resume \(id)"
        case .answer(let a): "answer \(a)"
        case .am(let status, _): "AM \(status)"
        case .redirect(let l): "302 \(l)"
        case .down: "AM down"
        case .pollDue: "pollDue"
        case .tokens: "tokens"
        case .tokensRefused: "tokens refused"
        }
    }
}

let flowTokens = TokenSet(
    accessToken: "at", idToken: nil, refreshToken: "rt", expiresAt: 1_700_003_600, scope: "openid")
let callbackURL = "http://127.0.0.1:8080/_platform/callback"

/// The actions as short words, so a table can state them.
func summary(_ actions: [JourneyFlow.Action]) -> [String] {
    actions.map { action in
        switch action {
        case .send(let request):
            let path = request.url.split(separator: "?")[0].split(separator: "/").suffix(1).joined()
            let query = request.url.contains("?") ? "?" + request.url.split(separator: "?")[1] : ""
            return "\(request.method) \(path)\(query.contains("suspendedId") ? " resume" : "")"
                + (request.headers.contains { $0.hasPrefix("Cookie") } ? " +cookie" : "")
        case .wait(let seconds): return "wait \(seconds)"
        case .exchange(let code, _): return "exchange \(code)"
        case .loggedIn(_, let session): return "loggedIn \(session ?? "-")"
        case .reply(let node):
            switch node {
            case .next(let step): return "reply continue \(step.callbacks.map(\.type).joined(separator: ","))"
            case .error(let message, _, let retry): return "reply error \(message)\(retry == nil ? "" : " +retry")"
            case .failure(let cause): return "reply failure \(cause)"
            case .success(let tokens): return "reply success tokens=\(tokens)"
            }
        }
    }
}

let loginStep = stepJSON(namePasswordCallbacks)
let otpStep = stepJSON(
    #"[{"type":"PasswordCallback","output":[{"name":"prompt","value":"One Time Password"}],"input":[{"name":"IDToken1","value":""}]}]"#,
    authId: "auth-2")
let pollStep = stepJSON(
    #"[{"type":"PollingWaitCallback","output":[{"name":"waitTime","value":"1000"},{"name":"message","value":"Waiting"}]}]"#,
    authId: "auth-p")
let hugePollStep = stepJSON(
    #"[{"type":"PollingWaitCallback","output":[{"name":"waitTime","value":"10000000000000"},{"name":"message","value":"Waiting"}]}]"#,
    authId: "auth-p")
let longPollStep = stepJSON(
    #"[{"type":"PollingWaitCallback","output":[{"name":"waitTime","value":"20000"},{"name":"message","value":"Waiting"}]}]"#,
    authId: "auth-p")
let suspendedStep = stepJSON(
    #"[{"type":"SuspendedTextOutputCallback","output":[{"name":"message","value":"Check your email"},{"name":"messageType","value":"0"}]}]"#,
    authId: "auth-s")
let successBody = #"{"tokenId":"tok","successUrl":"/console","realm":"/alpha"}"#
let refusedBody = #"{"code":401,"reason":"Unauthorized","message":"Login failure"}"#
let answers = #"{"IDToken1":"demo","IDToken2":"pw"}"#

struct JourneyFlowTests {
    /// (name, events with the actions each must return)
    static let cases: [(name: String, steps: [(JourneyEvent, [String])])] = [
        (
            "name + password, then authorize and exchange",
            [
                (.start, ["POST authenticate"]),
                (.am(200, loginStep), ["reply continue NameCallback,PasswordCallback"]),
                (.answer(answers), ["POST authenticate"]),
                (.am(200, successBody), ["GET authorize +cookie"]),
                (.redirect("\(callbackURL)?code=c1&state=st"), ["exchange c1"]),
                (.tokens, ["loggedIn tok", "reply success tokens=true"]),
            ]
        ),
        (
            "name + password + one-time code",
            [
                (.start, ["POST authenticate"]),
                (.am(200, loginStep), ["reply continue NameCallback,PasswordCallback"]),
                (.answer(answers), ["POST authenticate"]),
                (.am(200, otpStep), ["reply continue PasswordCallback"]),
                (.answer(#"{"IDToken1":"123456"}"#), ["POST authenticate"]),
                (.am(200, successBody), ["GET authorize +cookie"]),
            ]
        ),
        (
            "wrong password: error node with the restarted tree, then a retry succeeds",
            [
                (.start, ["POST authenticate"]),
                (.am(200, loginStep), ["reply continue NameCallback,PasswordCallback"]),
                (.answer(answers), ["POST authenticate"]),
                (.am(401, refusedBody), ["POST authenticate"]),
                (.am(200, loginStep), ["reply error Login failure +retry"]),
                (.answer(answers), ["POST authenticate"]),
                (.am(200, successBody), ["GET authorize +cookie"]),
            ]
        ),
        (
            "wrong password and the restart fails: error node without a retry",
            [
                (.start, ["POST authenticate"]),
                (.am(200, loginStep), ["reply continue NameCallback,PasswordCallback"]),
                (.answer(answers), ["POST authenticate"]),
                (.am(401, refusedBody), ["POST authenticate"]),
                (.down, ["reply error Login failure"]),
                (.answer(answers), []),
            ]
        ),
        (
            "AM down at start: failure node",
            [
                (.start, ["POST authenticate"]),
                (.down, ["reply failure connection refused"]),
                (.pollDue, []),
            ]
        ),
        (
            "AM answers 500: failure node",
            [
                (.start, ["POST authenticate"]),
                (.am(500, "{}"), ["reply failure AM answered HTTP 500"]),
            ]
        ),
        (
            "two polling waits are sent back by the proxy itself",
            [
                (.start, ["POST authenticate"]),
                (.am(200, loginStep), ["reply continue NameCallback,PasswordCallback"]),
                (.answer(answers), ["POST authenticate"]),
                (.am(200, pollStep), ["wait 1.0"]),
                (.pollDue, ["POST authenticate"]),
                (.am(200, pollStep), ["wait 1.0"]),
                (.pollDue, ["POST authenticate"]),
                (.am(200, successBody), ["GET authorize +cookie"]),
            ]
        ),
        (
            "polling beyond the turn's budget is handed to the app, which sends the step back",
            [
                (.start, ["POST authenticate"]),
                (.am(200, longPollStep), ["wait 20.0"]),
                (.pollDue, ["POST authenticate"]),
                (.am(200, longPollStep), ["wait 20.0"]),
                (.pollDue, ["POST authenticate"]),
                (.am(200, longPollStep), ["reply continue PollingWaitCallback"]),
                (.answer("{}"), ["POST authenticate"]),
                (.am(200, longPollStep), ["wait 20.0"]),
            ]
        ),
        (
            "a huge polling wait from the server is bounded by the budget (it once overflowed a deadline)",
            [
                (.start, ["POST authenticate"]),
                (.am(200, hugePollStep), ["wait 30.0"]),
            ]
        ),
        (
            "a suspended journey is shown, then resumed by its suspendedId",
            [
                (.start, ["POST authenticate"]),
                (.am(200, suspendedStep), ["reply continue SuspendedTextOutputCallback"]),
            ]
        ),
        (
            "resume starts at the suspendedId without a tree name",
            [
                (.resume("sus-1"), ["POST authenticate resume"]),
                (.am(200, successBody), ["GET authorize +cookie"]),
            ]
        ),
        (
            "noSession: success without tokens",
            [
                (.start, ["POST authenticate"]),
                (.am(200, #"{"successUrl":"/console","realm":"/alpha"}"#), ["reply success tokens=false"]),
            ]
        ),
        (
            "authorize without a valid session: failure node",
            [
                (.start, ["POST authenticate"]),
                (.am(200, successBody), ["GET authorize +cookie"]),
                (
                    .am(200, "<html>login</html>"),
                    [
                        "reply failure AM answered the authorize request with HTTP 200, not a redirect (no valid session, or consent is required)"
                    ]
                ),
            ]
        ),
        (
            "authorize refused by AM",
            [
                (.start, ["POST authenticate"]),
                (.am(200, successBody), ["GET authorize +cookie"]),
                (
                    .redirect("\(callbackURL)?error=access_denied&state=st"),
                    ["reply failure AM refused the authorization: access_denied"]
                ),
            ]
        ),
        (
            "the token endpoint refuses the code",
            [
                (.start, ["POST authenticate"]),
                (.am(200, successBody), ["GET authorize +cookie"]),
                (.redirect("\(callbackURL)?code=c1&state=st"), ["exchange c1"]),
                (.tokensRefused, ["reply failure the code exchange failed: invalid_grant"]),
                (.tokens, []),
            ]
        ),
        (
            "answers before any step, and a second start, do nothing",
            [
                (.answer(answers), []),
                (.start, ["POST authenticate"]),
                (.start, []),
            ]
        ),
    ]

    @Test("each journey walks through its actions", arguments: cases.map(\.name))
    func walk(name: String) {
        let steps = Self.cases.first { $0.name == name }!.steps
        var flow = JourneyFlow(
            client: journeyTestClient, journey: "Login", pkce: PKCE(verifier: "v"), state: "st", nonce: "n")
        for (index, (event, expected)) in steps.enumerated() {
            let actions: [JourneyFlow.Action]
            switch event {
            case .start: actions = flow.start()
            case .resume(let id): actions = flow.start(suspendedId: id)
            case .answer(let text): actions = (try? flow.answer(json(text).objectValue!).get()) ?? []
            case .am(let status, let body):
                actions = flow.answered(.success(.init(status: status, body: Array(body.utf8))))
            case .redirect(let location): actions = flow.answered(.success(.init(status: 302, location: location)))
            case .down: actions = flow.answered(.failure(JourneyTransportError("connection refused")))
            case .pollDue: actions = flow.pollDue()
            case .tokens: actions = flow.exchanged(.success(flowTokens))
            case .tokensRefused: actions = flow.exchanged(.failure(.refused("invalid_grant")))
            }
            #expect(summary(actions) == expected, "step \(index): \(event)")
        }
    }

    @Test("an answer with an unknown input name is refused and the step stays answerable")
    func badAnswer() {
        var flow = JourneyFlow(
            client: journeyTestClient, journey: "Login", pkce: PKCE(verifier: "v"), state: "st", nonce: "n")
        _ = flow.start()
        _ = flow.answered(.success(.init(status: 200, body: Array(loginStep.utf8))))
        #expect(throws: JourneyAnswerError.self) { try flow.answer(json(#"{"password":"x"}"#).objectValue!).get() }
        #expect(flow.awaitingStep != nil)
        #expect((try? flow.answer(json(answers).objectValue!).get()) != nil)
    }

    @Test("the polling step is sent back unchanged, with its authId")
    func pollBody() throws {
        var flow = JourneyFlow(
            client: journeyTestClient, journey: "Login", pkce: PKCE(verifier: "v"), state: "st", nonce: "n")
        _ = flow.start()
        _ = flow.answered(.success(.init(status: 200, body: Array(pollStep.utf8))))
        guard case .send(let request)? = flow.pollDue().first else { Issue.record("no request"); return }
        #expect(try JSONValue.parse(request.body!) == json(pollStep))
    }
}
