import Analytics
import EventLoop
import HTTPServer
import JSON

extension ProxyHandler {
    private static let json: [(name: String, value: String)] = [("Content-Type", "application/json"), ("Cache-Control", "no-store")]
    /// Largest analytics request body.
    static let maxAnalyticsBody = 1 << 20

    /// `/_platform/analytics/*`; false when `path` is not under it.
    func handleAnalyticsEndpoint(_ exchange: HTTPExchange, path: Substring) -> Bool {
        guard path.hasPrefix("/_platform/analytics/") else { return false }
        guard let analytics else {
            fail(exchange, .noRoute(String(path)))
            return true
        }
        let action = path.dropFirst("/_platform/analytics/".count)
        guard ["events", "operations/begin", "operations/finish", "operations/cancel", "phase", "flush"].contains(action) else {
            fail(exchange, .noRoute(String(path)))
            return true
        }
        collectBody(exchange, limit: Self.maxAnalyticsBody) { [weak self, weak exchange] body in
            guard let self, let exchange else { return }
            self.analyticsRequest(exchange, action: action, body: body, service: analytics)
        }
        return true
    }

    private func analyticsRequest(_ exchange: HTTPExchange, action: Substring, body: [UInt8], service: AnalyticsService) {
        let nowSeconds = Int64(UnixTime.now())
        switch action {
        case "events":
            guard let subject = analyticsCredentials.subject, analyticsCredentials.status.loggedIn else {
                return fail(exchange, analyticsCredentials.status.loggedIn ? .noSubjectForAnalytics : .notLoggedInForAnalytics)
            }
            let limits = EventsRequest.Limits(maxEvents: service.configuration.maxEventsPerRequest,
                                              maxValueBytes: service.configuration.maxValueBytes)
            switch EventsRequest.parse(body, keys: service.keys, now: nowSeconds, limits: limits) {
            case .failure(let error) where error.tooLarge: fail(exchange, .analyticsTooLarge(error.message, index: error.index))
            case .failure(let error): fail(exchange, .invalidAnalytics(error.message, index: error.index))
            case .success(let values): store(values, subject: subject, exchange: exchange, service: service, extra: [:])
            }
        case "operations/begin":
            withOperation(exchange, body, cancelOnAllowed: true) { request in
                switch service.begin(request, now: NanoTime.now().nanoseconds) {
                case .failure(let error): self.fail(exchange, .invalidAnalytics(error.message, index: nil))
                case .success(let key): self.sendJSON(exchange, 200, ["key": .string(key)])
                }
            }
        case "operations/finish":
            guard let subject = analyticsCredentials.subject, analyticsCredentials.status.loggedIn else {
                return fail(exchange, analyticsCredentials.status.loggedIn ? .noSubjectForAnalytics : .notLoggedInForAnalytics)
            }
            withOperation(exchange, body, cancelOnAllowed: false) { request in
                switch service.finish(request, now: NanoTime.now().nanoseconds) {
                case .failure(let error): self.fail(exchange, .invalidAnalytics(error.message, index: nil))
                case .success(nil): self.fail(exchange, .unknownOperation(request.operation))
                case .success(let found?):
                    let value = AnalyticsValue(key: found.key, value: String(found.milliseconds), timestamp: nowSeconds)
                    self.store([value], subject: subject, exchange: exchange, service: service,
                               extra: ["key": .string(found.key), "milliseconds": .number(JSONNumber(found.milliseconds))])
                }
            }
        case "operations/cancel":
            withOperation(exchange, body, cancelOnAllowed: false) { request in
                switch service.cancel(request) {
                case .failure(let error): self.fail(exchange, .invalidAnalytics(error.message, index: nil))
                case .success(nil): self.fail(exchange, .unknownOperation(request.operation))
                case .success(let key?): self.sendJSON(exchange, 200, ["cancelled": .string(key)])
                }
            }
        case "phase":
            switch PhaseRequest.parse(body) {
            case .failure(let error): fail(exchange, .invalidAnalytics(error.message, index: nil))
            case .success(let phase): sendJSON(exchange, 200, ["cancelled": .array(service.phase(phase).map { .string($0) })])
            }
        default:  // flush
            service.flush(replyOn: loop) { [weak self, weak exchange] report in
                guard let self, let exchange else { return }
                self.sendJSON(exchange, 200, ["sent": .number(JSONNumber(report.sent)), "dropped": .number(JSONNumber(report.dropped)),
                                              "remaining": .number(JSONNumber(report.remaining)),
                                              "deferred": report.deferredReason.map { .string($0) } ?? .null])
            }
        }
    }

    /// Commits `values` and answers 202 only then (docs/analytics.md: durable before acknowledged).
    private func store(_ values: [AnalyticsValue], subject: String, exchange: HTTPExchange, service: AnalyticsService,
                       extra: [String: JSONValue]) {
        service.record(values, subject: subject, replyOn: loop) { [weak self, weak exchange] result in
            guard let self, let exchange else { return }
            switch result {
            case .success(let stored):
                service.recent.add(values)
                var fields = extra
                fields["accepted"] = .number(JSONNumber(values.count))
                fields["stored"] = .number(JSONNumber(stored))
                self.sendJSON(exchange, 202, fields)
            case .failure(let error) where error.isStorageFull:
                self.log.emit(.error, "analytics_store_full", [("error", .string("\(error)"))])
                self.fail(exchange, .analyticsStoreFull)
            case .failure(let error):
                self.log.emit(.error, "analytics_store_failed", [("error", .string("\(error)"))])
                self.fail(exchange, .analyticsStoreFailed)
            }
        }
    }

    private func withOperation(_ exchange: HTTPExchange, _ body: [UInt8], cancelOnAllowed: Bool, _ then: (OperationRequest) -> Void) {
        switch OperationRequest.parse(body, requireCancelOnAllowed: cancelOnAllowed) {
        case .failure(let error): fail(exchange, .invalidAnalytics(error.message, index: error.index))
        case .success(let request): then(request)
        }
    }

    private func sendJSON(_ exchange: HTTPExchange, _ status: Int, _ fields: [String: JSONValue]) {
        var object = JSONObject()
        for key in fields.keys.sorted() { object[key] = fields[key] }
        send(exchange, status: status, headers: Self.json, body: JSONValue.object(object).serializedBytes())
    }

    /// Collects a request body up to `limit` bytes, then calls `then`; a larger body gets 413.
    func collectBody(_ exchange: HTTPExchange, limit: Int, _ then: @escaping ([UInt8]) -> Void) {
        let collected = CollectedBody(limit: limit)
        exchange.info?.collected = collected
        exchange.afterBody { [weak self, weak exchange] in
            guard let self, let exchange else { return }
            if collected.tooLarge { return self.fail(exchange, .bodyTooLarge) }
            then(collected.bytes)
        }
    }
}
