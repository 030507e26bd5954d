import Testing

@testable import Proxy

/// One row: the providers, the outcomes fed in turn, and the actions they must give.
struct PhasedLoginCase: CustomTestStringConvertible, Sendable {
    let name: String
    let providers: [String]
    let steps: [(provider: String, outcome: PhasedLogin.Outcome)]
    let actions: [PhasedLogin.Action]
    var testDescription: String { name }
}

private typealias Report = PhasedLogin.Report
private func report(_ signedIn: [String], _ not: [(String, String)] = []) -> Report {
    var report = Report()
    report.signedIn = signedIn
    report.notSignedIn = not.map { Report.Refusal(provider: $0.0, reason: $0.1) }
    return report
}

@Suite("PhasedLogin")
struct PhasedLoginTests {
    static let cases: [PhasedLoginCase] = [
        PhasedLoginCase(
            name: "the first provider is asked, the second tried silently and signed in",
            providers: ["a", "b"], steps: [("a", .signedIn), ("b", .signedIn)],
            actions: [
                .authorize(provider: "a", silent: false), .authorize(provider: "b", silent: true),
                .finish(report(["a", "b"])),
            ]),
        PhasedLoginCase(
            name: "login_required on the silent try asks again interactively",
            providers: ["a", "b"], steps: [("a", .signedIn), ("b", .interactionRequired), ("b", .signedIn)],
            actions: [
                .authorize(provider: "a", silent: false), .authorize(provider: "b", silent: true),
                .authorize(provider: "b", silent: false), .finish(report(["a", "b"])),
            ]),
        PhasedLoginCase(
            name: "a refusal is reported and the chain goes on to the next provider",
            providers: ["a", "b", "c"], steps: [("a", .signedIn), ("b", .refused("access_denied")), ("c", .signedIn)],
            actions: [
                .authorize(provider: "a", silent: false), .authorize(provider: "b", silent: true),
                .authorize(provider: "c", silent: true), .finish(report(["a", "c"], [("b", "access_denied")])),
            ]),
        PhasedLoginCase(
            name: "an interactive attempt that still needs a login is not retried",
            providers: ["a", "b"], steps: [("a", .signedIn), ("b", .interactionRequired), ("b", .interactionRequired)],
            actions: [
                .authorize(provider: "a", silent: false), .authorize(provider: "b", silent: true),
                .authorize(provider: "b", silent: false),
                .finish(report(["a"], [("b", "the authorization server still asked for a login")])),
            ]),
        PhasedLoginCase(
            name: "the first provider refusing still moves on, silently",
            providers: ["a", "b"], steps: [("a", .failed("code exchange failed")), ("b", .interactionRequired)],
            actions: [
                .authorize(provider: "a", silent: false), .authorize(provider: "b", silent: true),
                .authorize(provider: "b", silent: false),
            ]),
        PhasedLoginCase(
            name: "a callback for another provider than the current step is ignored",
            providers: ["a", "b"], steps: [("b", .signedIn), ("a", .signedIn)],
            actions: [.authorize(provider: "a", silent: false), .ignore, .authorize(provider: "b", silent: true)]),
        PhasedLoginCase(
            name: "a single provider chain finishes after its one login",
            providers: ["a"], steps: [("a", .signedIn)],
            actions: [.authorize(provider: "a", silent: false), .finish(report(["a"]))]),
    ]

    @Test("each row gives its actions in order", arguments: cases)
    func table(_ row: PhasedLoginCase) {
        var login = PhasedLogin(providers: row.providers)
        var actions = [login.start()]
        for (provider, outcome) in row.steps { actions.append(login.completed(provider, outcome)) }
        #expect(actions == row.actions)
    }

    @Test("after the finish every further event is ignored")
    func finishedIgnoresEvents() {
        var login = PhasedLogin(providers: ["a"])
        _ = login.start()
        _ = login.completed("a", .signedIn)
        #expect(login.completed("a", .signedIn) == .ignore)
        #expect(login.state == .finished(report(["a"])))
    }

    @Test("a state is bound to its provider and chain once, and expires")
    func chainsBindStates() {
        let chains = LoginChains()
        let (id, action) = chains.startChain(["a", "b"], now: 1000)
        #expect(action == .authorize(provider: "a", silent: false))
        chains.bind(state: "s1", provider: "a", chain: id, now: 1000)
        #expect(chains.take(state: "s1", now: 1001)?.provider == "a")
        #expect(chains.take(state: "s1", now: 1001) == nil)
        chains.bind(state: "s2", provider: "b", chain: id, now: 1000)
        #expect(chains.take(state: "s2", now: 1000 + LoginChains.lifetime + 1) == nil)
        #expect(chains.completed(chain: id, provider: "a", .signedIn) == .authorize(provider: "b", silent: true))
        #expect(chains.completed(chain: id, provider: "b", .signedIn) == .finish(report(["a", "b"])))
        #expect(chains.completed(chain: id, provider: "b", .signedIn) == .ignore)
    }

    @Test("a chain lives as long as the state of its latest step, not ten minutes from its start")
    func chainOutlivesItsStartWhileStepsGoOn() {
        let chains = LoginChains()
        let (id, _) = chains.startChain(["a", "b", "c"], now: 1000)
        chains.bind(state: "sa", provider: "a", chain: id, now: 1000)
        #expect(chains.take(state: "sa", now: 1500) != nil)
        #expect(chains.completed(chain: id, provider: "a", .signedIn) == .authorize(provider: "b", silent: true))
        // b's step starts nine minutes in; its user takes five minutes at the form.
        chains.bind(state: "sb", provider: "b", chain: id, now: 1540)
        // Another login started meanwhile prunes what has expired.
        _ = chains.startChain(["x"], now: 1800)
        #expect(chains.take(state: "sb", now: 1840)?.chain == id)
        #expect(chains.completed(chain: id, provider: "b", .signedIn) == .authorize(provider: "c", silent: true))
    }
}
