import Config
import Credentials
import Testing
import Upstream

@testable import Proxy

private typealias Machine = ForwardStateMachine
private typealias Action = ForwardStateMachine.Action

private let foreign = UpstreamURL.parse("http://foreign.example/next")!
private let follow = RedirectPolicy.Decision.follow(url: foreign, method: "GET", keepsBody: false)
private let timeout = UpstreamError.timeout("no response head")
private let reset = UpstreamError.unreachable("connection closed with 97 bytes missing")
private let stale = UpstreamError.staleConnection("Send failure: Broken pipe")
private let noCredentials = ProxyError.credentialsUnavailable("access_token")

/// The states a table row starts from, each reached through the machine's own events.
private enum Start: CaseIterable {
    case idle, sendingBody, awaitingHead, discarding401, awaitingRefreshAfter401, redirectingFollow,
        redirectingTooMany, relaying, relayingEarly, finishedRelayed, finishedClientGone

    var machine: Machine {
        var m = Machine(hasBody: true)
        switch self {
        case .idle: return m
        case .finishedClientGone:
            _ = m.start()
            _ = m.clientGone()
            return m
        default: _ = m.start()
        }
        if self == .sendingBody { return m }
        if self == .relayingEarly {
            // An early answer: the head came while the body still went up, which it never finished.
            _ = m.receivedHead(status: 200, retryAfter401: { true }, redirect: { _ in .relay })
            return m
        }
        m.requestSent()
        switch self {
        case .awaitingHead: break
        case .discarding401: _ = m.receivedHead(status: 401, retryAfter401: { true }, redirect: { _ in .relay })
        case .awaitingRefreshAfter401:
            _ = m.receivedHead(status: 401, retryAfter401: { true }, redirect: { _ in .relay })
            _ = m.transferCompleted(nil, carriesCredentials: { _ in true })
        case .redirectingFollow: _ = m.receivedHead(status: 302, retryAfter401: { true }, redirect: { _ in follow })
        case .redirectingTooMany:
            _ = m.receivedHead(status: 302, retryAfter401: { true }, redirect: { _ in .tooManyRedirects })
        case .relaying: _ = m.receivedHead(status: 200, retryAfter401: { true }, redirect: { _ in .relay })
        case .finishedRelayed:
            _ = m.receivedHead(status: 200, retryAfter401: { true }, redirect: { _ in .relay })
            _ = m.transferCompleted(nil, carriesCredentials: { _ in true })
        default: break
        }
        return m
    }
}

/// Every event the machine takes, with fixed answers from the exchange: a 401 may be retried,
/// a 3xx is followed to a foreign host that does not get the credentials.
private enum Event: CaseIterable {
    case start, requestSent, head200, head401, head302, completedOK, completedTimeout, completedUnreachable,
        completedStale, completedCancelled, refreshReady, refreshSuppressed, refreshUnavailable, refreshNotLoggedIn,
        couldNotSend, clientGone

    /// What an event returns: an action, a head verdict, or nothing.
    enum Output: Equatable {
        case action(Action)
        case head(Machine.HeadAction)
        case nothing
    }

    func apply(_ m: inout Machine) -> Output {
        switch self {
        case .start: return .action(m.start())
        case .requestSent:
            m.requestSent()
            return .nothing
        case .head200: return .head(m.receivedHead(status: 200, retryAfter401: { true }, redirect: { _ in .relay }))
        case .head401: return .head(m.receivedHead(status: 401, retryAfter401: { true }, redirect: { _ in .relay }))
        case .head302: return .head(m.receivedHead(status: 302, retryAfter401: { true }, redirect: { _ in follow }))
        case .completedOK: return .action(m.transferCompleted(nil, carriesCredentials: { _ in false }))
        case .completedTimeout: return .action(m.transferCompleted(timeout, carriesCredentials: { _ in false }))
        case .completedUnreachable: return .action(m.transferCompleted(reset, carriesCredentials: { _ in false }))
        // Every start has a body: a stale connection is a failure like any other there.
        case .completedStale:
            return .action(m.transferCompleted(stale, carriesCredentials: { _ in false }, idempotent: { true }))
        case .completedCancelled: return .action(m.transferCompleted(.cancelled, carriesCredentials: { _ in false }))
        case .refreshReady: return .action(m.refreshAnswered(.ready))
        case .refreshSuppressed: return .action(m.refreshAnswered(.suppressed))
        case .refreshUnavailable: return .action(m.refreshAnswered(.unavailable("down")))
        case .refreshNotLoggedIn: return .action(m.refreshAnswered(.notLoggedIn))
        case .couldNotSend: return .action(m.couldNotSend(noCredentials))
        case .clientGone: return .action(m.clientGone())
        }
    }

    /// What an event does in a state the table does not list: nothing.
    var ignored: Output {
        switch self {
        case .head200, .head401, .head302: .head(.ignore)
        case .requestSent: .nothing
        default: .action(.none)
        }
    }
}

private typealias State = ForwardStateMachine.State

/// The transitions; every (state, event) pair not listed leaves the state as it was and does nothing.
private let table: [Event: [Start: (State, Event.Output)]] = [
    .start: [.idle: (.sendingBody, .action(.send))],
    .requestSent: [.sendingBody: (.awaitingHead, .nothing)],
    .head200: [.sendingBody: (.relaying, .head(.relay)), .awaitingHead: (.relaying, .head(.relay))],
    .head401: [.sendingBody: (.discarding401, .head(.discard)), .awaitingHead: (.discarding401, .head(.discard))],
    .head302: [
        .sendingBody: (.redirecting(follow), .head(.discard)), .awaitingHead: (.redirecting(follow), .head(.discard)),
    ],
    .completedOK: [
        .sendingBody: (.finished(.failed(.upstreamUnreachable)), .action(.fail(.upstreamUnreachable))),
        .awaitingHead: (.finished(.failed(.upstreamUnreachable)), .action(.fail(.upstreamUnreachable))),
        .discarding401: (.awaitingRefreshAfter401, .action(.refreshAfter401)),
        .redirectingFollow: (
            .awaitingHead, .action(.follow(url: foreign, method: "GET", keepsBody: false, credentials: .stripped))
        ),
        .redirectingTooMany: (.finished(.failed(.tooManyRedirects)), .action(.fail(.tooManyRedirects))),
        .relaying: (.finished(.relayed), .action(.endResponse)),
        // The transfer ends once an early answer came whole, its upload cut short: the answer is relayed whole.
        .relayingEarly: (.finished(.relayed), .action(.endResponse)),
    ],
    .completedTimeout: failures(timeout, .upstreamTimeout),
    .completedUnreachable: failures(reset, .upstreamUnreachable),
    .completedStale: failures(stale, .upstreamUnreachable),
    .completedCancelled: [:],
    .refreshReady: [.awaitingRefreshAfter401: (.sendingBody, .action(.resend(refreshed: true)))],
    .refreshSuppressed: [.awaitingRefreshAfter401: (.sendingBody, .action(.resend(refreshed: false)))],
    .refreshUnavailable: [
        .awaitingRefreshAfter401: (
            .finished(.failed(.authServerUnavailable("down"))),
            .action(.fail(.authServerUnavailable("down")))
        )
    ],
    .refreshNotLoggedIn: [
        .awaitingRefreshAfter401: (.finished(.failed(.awaitingAuthorization)), .action(.fail(.awaitingAuthorization)))
    ],
    .couldNotSend: [
        .idle: (.finished(.failed(noCredentials)), .action(.fail(noCredentials))),
        .sendingBody: (.finished(.failed(noCredentials)), .action(.fail(noCredentials))),
        .awaitingHead: (.finished(.failed(noCredentials)), .action(.fail(noCredentials))),
        .awaitingRefreshAfter401: (.finished(.failed(noCredentials)), .action(.fail(noCredentials))),
    ],
    .clientGone: [
        .idle: (.finished(.clientGone), .action(.none)),
        .sendingBody: (.finished(.clientGone), .action(.cancelTransfer)),
        .awaitingHead: (.finished(.clientGone), .action(.cancelTransfer)),
        .discarding401: (.finished(.clientGone), .action(.cancelTransfer)),
        .awaitingRefreshAfter401: (.finished(.clientGone), .action(.none)),
        .redirectingFollow: (.finished(.clientGone), .action(.cancelTransfer)),
        .redirectingTooMany: (.finished(.clientGone), .action(.cancelTransfer)),
        .relaying: (.finished(.clientGone), .action(.cancelTransfer)),
        .relayingEarly: (.finished(.clientGone), .action(.cancelTransfer)),
    ],
]

/// An upstream failure: replaces or cuts a relayed response, else answers with the error at once.
private func failures(_ error: UpstreamError, _ answer: ProxyError) -> [Start: (State, Event.Output)] {
    var rows: [Start: (State, Event.Output)] = [:]
    for start in [Start.sendingBody, .awaitingHead, .discarding401, .redirectingFollow, .redirectingTooMany] {
        rows[start] = (.finished(.failed(answer)), .action(.failUpstream(error, answer: answer)))
    }
    rows[.relaying] = (.finished(.failed(answer)), .action(.retractOrCut(error, answer: answer)))
    rows[.relayingEarly] = rows[.relaying]
    return rows
}

@Suite("ForwardStateMachine")
struct ForwardStateMachineTests {
    @Test("every state and event pair does what the table says, and nothing where it lists nothing")
    func transitionTable() {
        for event in Event.allCases {
            for start in Start.allCases {
                var m = start.machine
                let before = m.state
                let output = event.apply(&m)
                let (expectedState, expectedOutput) = table[event]?[start] ?? (before, event.ignored)
                #expect(m.state == expectedState, "\(event) in \(start)")
                #expect(output == expectedOutput, "\(event) in \(start)")
            }
        }
    }

    @Test("a bodiless idempotent hop whose pooled connection was stale is sent once more, and only once")
    func staleConnectionResend() {
        var m = Machine(hasBody: false)
        _ = m.start()
        #expect(
            m.transferCompleted(stale, carriesCredentials: { _ in true }, idempotent: { true }) == .resendHop(stale))
        #expect(m.state == .awaitingHead)
        // The resent hop's connection fails the same way: the 502 it would have been.
        #expect(
            m.transferCompleted(stale, carriesCredentials: { _ in true }, idempotent: { true })
                == .failUpstream(stale, answer: .upstreamUnreachable))
        #expect(m.state == .finished(.failed(.upstreamUnreachable)))
    }

    @Test("a stale connection is not resent for a non-idempotent method, a body, or any other error")
    func staleConnectionNotResent() {
        // (hasBody, idempotent, error): only (false, true, stale) resends, checked above.
        let cases: [(Bool, Bool, UpstreamError)] = [
            (false, false, stale), (true, true, stale), (true, false, stale),
            (false, true, reset), (false, true, timeout),
        ]
        for (hasBody, idempotent, error) in cases {
            var m = Machine(hasBody: hasBody)
            _ = m.start()
            m.requestSent()
            let answer: ProxyError = error.isTimeout ? .upstreamTimeout : .upstreamUnreachable
            #expect(
                m.transferCompleted(error, carriesCredentials: { _ in true }, idempotent: { idempotent })
                    == .failUpstream(error, answer: answer), "\(hasBody) \(idempotent) \(error)")
        }
        // After a head arrived nothing is resent: the relayed response is cut or replaced.
        var relaying = Machine(hasBody: false)
        _ = relaying.start()
        _ = relaying.receivedHead(status: 200, retryAfter401: { false }, redirect: { _ in .relay })
        #expect(
            relaying.transferCompleted(stale, carriesCredentials: { _ in true }, idempotent: { true })
                == .retractOrCut(stale, answer: .upstreamUnreachable))
    }

    @Test("a resent redirect hop keeps its stripped credentials")
    func staleConnectionOnStrippedHop() {
        var m = Machine(hasBody: false)
        _ = m.start()
        _ = m.receivedHead(status: 302, retryAfter401: { false }, redirect: { _ in follow })
        #expect(
            m.transferCompleted(nil, carriesCredentials: { _ in false })
                == .follow(url: foreign, method: "GET", keepsBody: false, credentials: .stripped))
        #expect(
            m.transferCompleted(stale, carriesCredentials: { _ in false }, idempotent: { true }) == .resendHop(stale))
        #expect(m.credentials == .stripped && m.hops == 1)
    }

    @Test("a bodiless request waits for the head at once; a body is sent first")
    func startsByBody() {
        var bodiless = Machine(hasBody: false)
        #expect(bodiless.start() == .send)
        #expect(bodiless.state == .awaitingHead)
        var upload = Machine(hasBody: true)
        #expect(upload.start() == .send)
        #expect(upload.state == .sendingBody)
    }

    @Test("a long upload stays in sendingBody until its last byte; a stall there is a 504 answered at once")
    func longUploadStallTimeout() {
        var m = Machine(hasBody: true)
        _ = m.start()
        #expect(m.state == .sendingBody)
        #expect(
            m.transferCompleted(timeout, carriesCredentials: { _ in true })
                == .failUpstream(timeout, answer: .upstreamTimeout))
        #expect(m.state == .finished(.failed(.upstreamTimeout)))
    }

    @Test("an early answer while the body still flows is relayed and the body end changes nothing")
    func earlyResponse() {
        var m = Machine(hasBody: true)
        _ = m.start()
        #expect(m.receivedHead(status: 413, retryAfter401: { true }, redirect: { _ in .relay }) == .relay)
        m.requestSent()
        #expect(m.state == .relaying)
        #expect(m.relaysBody)
    }

    @Test("a client gone before the head cancels the transfer, and later answers are ignored")
    func clientGoneBeforeHead() {
        var m = Machine(hasBody: false)
        _ = m.start()
        #expect(m.clientGone() == .cancelTransfer)
        #expect(m.state == .finished(.clientGone))
        #expect(m.transferCompleted(.cancelled, carriesCredentials: { _ in true }) == .none)
        #expect(m.receivedHead(status: 200, retryAfter401: { true }, redirect: { _ in .relay }) == .ignore)
        #expect(m.clientGone() == .none)
    }

    @Test("a client gone while the refresh after a 401 is asked makes its answer do nothing")
    func clientGoneDuringRefresh() {
        var m = Start.awaitingRefreshAfter401.machine
        #expect(m.clientGone() == .none)
        #expect(m.refreshAnswered(.ready) == .none)
        #expect(m.state == .finished(.clientGone))
    }

    @Test("an upstream closing right after its head: the response is retracted for a 502, or cut short")
    func upstreamClosesAfterHead() {
        var m = Start.relaying.machine
        #expect(
            m.transferCompleted(reset, carriesCredentials: { _ in true })
                == .retractOrCut(reset, answer: .upstreamUnreachable))
        #expect(m.state == .finished(.failed(.upstreamUnreachable)))
    }

    @Test("the 401 retry happens once: a second 401 is relayed without asking again")
    func retryOnce() {
        var m = Start.awaitingRefreshAfter401.machine
        #expect(m.refreshAnswered(.ready) == .resend(refreshed: true))
        m.requestSent()
        var asked = 0
        let verdict = m.receivedHead(
            status: 401,
            retryAfter401: {
                asked += 1; return true
            }, redirect: { _ in .relay })
        #expect(verdict == .relay)
        #expect(asked == 0)
        #expect(m.leg == .retriedAfter401)
    }

    @Test("a 401 whose retry is not allowed (tokens too young, body not kept) is relayed")
    func retryRefused() {
        var m = Start.awaitingHead.machine
        #expect(m.receivedHead(status: 401, retryAfter401: { false }, redirect: { _ in .relay }) == .relay)
        #expect(m.state == .relaying)
    }

    @Test("a 401 after a redirect hop is relayed: only the first send is retried")
    func noRetryAfterRedirect() {
        var m = Start.redirectingFollow.machine
        _ = m.transferCompleted(nil, carriesCredentials: { _ in true })
        #expect(m.hops == 1)
        var asked = 0
        #expect(
            m.receivedHead(
                status: 401,
                retryAfter401: {
                    asked += 1; return true
                }, redirect: { _ in .relay }) == .relay)
        #expect(asked == 0)
    }

    @Test("redirect hops are counted into the decision, and the last allowed one is followed")
    func hopCounting() {
        var m = Start.awaitingHead.machine
        var seen: [Int] = []
        for _ in 0..<3 {
            _ = m.receivedHead(
                status: 302, retryAfter401: { true },
                redirect: {
                    seen.append($0); return follow
                })
            _ = m.transferCompleted(nil, carriesCredentials: { _ in true })
        }
        #expect(seen == [0, 1, 2])
        #expect(m.hops == 3)
        _ = m.receivedHead(status: 302, retryAfter401: { true }, redirect: { _ in .tooManyRedirects })
        #expect(m.transferCompleted(nil, carriesCredentials: { _ in true }) == .fail(.tooManyRedirects))
    }

    @Test("once a hop leaves the credential hosts, the rest of the chain stays stripped")
    func strippingIsSticky() {
        var m = Start.redirectingFollow.machine
        #expect(
            m.transferCompleted(nil, carriesCredentials: { _ in false })
                == .follow(url: foreign, method: "GET", keepsBody: false, credentials: .stripped))
        _ = m.receivedHead(status: 302, retryAfter401: { true }, redirect: { _ in follow })
        var asked = 0
        let back = m.transferCompleted(
            nil,
            carriesCredentials: { _ in
                asked += 1; return true
            })
        #expect(back == .follow(url: foreign, method: "GET", keepsBody: false, credentials: .stripped))
        #expect(asked == 0)
    }

    @Test("a trusted hop carries the credentials")
    func trustedHopCarries() {
        var m = Start.redirectingFollow.machine
        #expect(
            m.transferCompleted(nil, carriesCredentials: { _ in true })
                == .follow(url: foreign, method: "GET", keepsBody: false, credentials: .carried))
        #expect(m.credentials == .carried)
    }

    @Test("a 307 keeping the body sends it again before the head is awaited; a 303 drops it")
    func redirectBody() {
        var keeps = Start.awaitingHead.machine
        let post = RedirectPolicy.Decision.follow(url: foreign, method: "POST", keepsBody: true)
        _ = keeps.receivedHead(status: 307, retryAfter401: { true }, redirect: { _ in post })
        _ = keeps.transferCompleted(nil, carriesCredentials: { _ in true })
        #expect(keeps.state == .sendingBody)
        var drops = Start.redirectingFollow.machine
        _ = drops.transferCompleted(nil, carriesCredentials: { _ in true })
        #expect(drops.state == .awaitingHead)
        #expect(!drops.sendsBody)
    }

    @Test("a 3xx the policy relays reaches the client")
    func relayedRedirect() {
        var m = Start.awaitingHead.machine
        #expect(m.receivedHead(status: 302, retryAfter401: { true }, redirect: { _ in .relay }) == .relay)
        #expect(m.state == .relaying)
    }

    @Test("body bytes are relayed only while relaying")
    func bodyDisposition() {
        for start in Start.allCases {
            #expect(start.machine.relaysBody == (start == .relaying || start == .relayingEarly), "\(start)")
        }
    }
}
