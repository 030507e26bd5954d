import Config
import Credentials
import EventLoop
import HTTPServer
import JSON

/// A request held by the gate (`gate.mode: wait`).
struct GatedRequest {
    weak var exchange: HTTPExchange?
    let resume: () -> Void
    let timer: TimerID
}

extension ProxyHandler {
    /// New tokens or a new login state, sent by whoever owns the tokens (manager or file watcher).
    public func credentialsChanged(_ snapshot: CredentialSnapshot) {
        let previous = credentials.status
        credentials = snapshot
        if uploadsHere { analytics?.credentialsChanged(snapshot) }
        if snapshot.status != previous { broadcastState() }
        if snapshot.status.loggedIn && !gated.isEmpty {
            let released = gated
            gated.removeAll()
            for request in released {
                loop.cancel(request.timer)
                request.resume()
            }
        }
    }

    /// The awaiting-authorization gate: `reject` answers 401 at once; `wait` holds the request
    /// (its body stays in the socket) until a login or `waitSeconds`.
    func gate(_ exchange: HTTPExchange, resume: @escaping () -> Void) {
        let gate = runtime.configuration.gate
        metrics.gateRejected(route: exchange.info?.route ?? "")
        guard gate.mode == .wait, gate.waitSeconds > 0 else { return fail(exchange, .awaitingAuthorization) }
        exchange.pauseBody()
        let timer = loop.schedule(at: loop.now.adding(seconds: gate.waitSeconds)) { [weak self, weak exchange] in
            guard let self, let exchange else { return }
            self.gated.removeAll { $0.exchange === exchange }
            self.fail(exchange, .awaitingAuthorization)
        }
        gated.append(GatedRequest(exchange: exchange, resume: resume, timer: timer))
    }

    /// Stopping: event streams end (their clients reconnect elsewhere), held requests get 503.
    public func shutdown() {
        let streams = eventStreams
        eventStreams.removeAll()
        for stream in streams { stream.endResponse() }
        let held = gated
        gated.removeAll()
        for request in held {
            loop.cancel(request.timer)
            if let exchange = request.exchange { fail(exchange, .shuttingDown) }
        }
    }

    /// Why `/_platform/ready` is not 200, or nil.
    func unreadyReason() -> String? {
        guard let provider = runtime.configuration.provider else { return nil }
        if provider.grant == .staticTokens { return runtime.unreadyReason() }
        // The details (URLs, the IdP's words) are in the log; probes get no more than this.
        if credentials.providerProblem != nil { return "the identity provider is not usable yet (its discovery or endpoints failed; the log has the details)" }
        guard credentials.status.loggedIn else { return "not logged in (state \(credentials.status.state.rawValue))" }
        return nil
    }

    // MARK: /_platform/auth and its event stream

    /// `{"state":…, "loggedIn":…, "expiresAt":…, "subject":…, "lastError":…}`.
    func authJSON() -> [UInt8] {
        let status = credentials.status
        var object = JSONObject()
        object["state"] = .string(status.state.rawValue)
        object["loggedIn"] = .bool(status.loggedIn)
        object["expiresAt"] = status.expiresAt.map { .number(JSONNumber(($0).rounded())) } ?? .null
        object["subject"] = status.subject.map { .string($0) } ?? .null
        object["lastError"] = status.lastError.map { .string($0) } ?? .null
        return JSONValue.object(object).serializedBytes()
    }

    /// Opens a Server-Sent Events stream: one `state` event now and one at every change.
    func openEventStream(_ exchange: HTTPExchange) {
        exchange.startResponse(status: 200, headers: [("Content-Type", "text/event-stream"), ("Cache-Control", "no-store"),
                                                      ("X-Request-ID", exchange.info?.requestID ?? "")],
                               framing: .streamed)
        // A client that hangs up ends the exchange; `finished` takes it off the list.
        eventStreams.append(exchange)
        writeEvent(to: exchange)
        if heartbeat == nil { scheduleHeartbeat() }
    }

    private func broadcastState() {
        for stream in eventStreams { writeEvent(to: stream) }
    }

    private func writeEvent(to exchange: HTTPExchange) {
        var bytes = Array("event: state\ndata: ".utf8)
        bytes += authJSON()
        bytes += Array("\n\n".utf8)
        bytes.withUnsafeBytes { exchange.writeBody($0) }
    }

    /// A comment line every 15 s keeps intermediaries from closing idle streams and finds dead clients.
    private func scheduleHeartbeat() {
        heartbeat = loop.schedule(at: loop.now.adding(seconds: 15)) { [weak self] in
            guard let self else { return }
            self.heartbeat = nil
            self.eventStreams.removeAll { $0.isAborted || $0.responseEnded }
            guard !self.eventStreams.isEmpty else { return }
            let comment = Array(": keep-alive\n\n".utf8)
            for stream in self.eventStreams { comment.withUnsafeBytes { stream.writeBody($0) } }
            self.scheduleHeartbeat()
        }
    }
}
