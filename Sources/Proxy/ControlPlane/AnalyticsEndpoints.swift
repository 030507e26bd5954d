import Analytics
import EventLoop
import HTTPServer
import JSON

private let json: [(name: String, value: String)] = [
    ("Content-Type", "application/json"), ("Cache-Control", "no-store"),
]
/// Largest analytics request body.
private let maxAnalyticsBody = 1 << 20

extension EndpointContext {

    /// `/_platform/analytics/*`; false when `path` is not under it.
    func handleAnalyticsEndpoint(_ context: ExchangeContext, path: Substring) -> Bool {
        guard path.hasPrefix("/_platform/analytics/") else { return false }
        guard let analytics else {
            fail(context, .noRoute(String(path)))
            return true
        }
        let action = path.dropFirst("/_platform/analytics/".count)
        guard
            ["events", "operations/begin", "operations/finish", "operations/cancel", "phase", "flush"].contains(action)
        else {
            fail(context, .noRoute(String(path)))
            return true
        }
        collectBody(context, limit: maxAnalyticsBody) { [weak self, weak context] body in
            guard let self, let context else { return }
            self.analyticsRequest(context, action: action, body: body, service: analytics)
        }
        return true
    }

    private func analyticsRequest(
        _ context: ExchangeContext, action: Substring, body: [UInt8], service: AnalyticsService
    ) {
        let nowSeconds = Int64(UnixTime.now())
        switch action {
        case "events":
            guard let subject = analyticsCredentials.subject, analyticsCredentials.status.loggedIn else {
                return fail(
                    context, analyticsCredentials.status.loggedIn ? .noSubjectForAnalytics : .notLoggedInForAnalytics)
            }
            let limits = EventsRequest.Limits(
                maxEvents: service.configuration.maxEventsPerRequest,
                maxValueBytes: service.configuration.maxValueBytes)
            switch EventsRequest.parse(body, keys: service.keys, now: nowSeconds, limits: limits) {
            case .failure(let error) where error.tooLarge:
                fail(context, .analyticsTooLarge(error.message, index: error.index))
            case .failure(let error): fail(context, .invalidAnalytics(error.message, index: error.index))
            case .success(let values): store(values, subject: subject, context: context, service: service, extra: [:])
            }
        case "operations/begin":
            withOperation(context, body, cancelOnAllowed: true) { request in
                switch service.begin(request, now: NanoTime.now().nanoseconds) {
                case .failure(let error): self.fail(context, .invalidAnalytics(error.message, index: nil))
                case .success(let key): self.sendJSON(context, 200, ["key": .string(key)])
                }
            }
        case "operations/finish":
            guard let subject = analyticsCredentials.subject, analyticsCredentials.status.loggedIn else {
                return fail(
                    context, analyticsCredentials.status.loggedIn ? .noSubjectForAnalytics : .notLoggedInForAnalytics)
            }
            withOperation(context, body, cancelOnAllowed: false) { request in
                switch service.finish(request, now: NanoTime.now().nanoseconds) {
                case .failure(let error): self.fail(context, .invalidAnalytics(error.message, index: nil))
                case .success(nil): self.fail(context, .unknownOperation(request.operation))
                case .success(let found?):
                    let value = AnalyticsValue(key: found.key, value: String(found.milliseconds), timestamp: nowSeconds)
                    self.store(
                        [value], subject: subject, context: context, service: service,
                        extra: ["key": .string(found.key), "milliseconds": .number(JSONNumber(found.milliseconds))])
                }
            }
        case "operations/cancel":
            withOperation(context, body, cancelOnAllowed: false) { request in
                switch service.cancel(request) {
                case .failure(let error): self.fail(context, .invalidAnalytics(error.message, index: nil))
                case .success(nil): self.fail(context, .unknownOperation(request.operation))
                case .success(let key?): self.sendJSON(context, 200, ["cancelled": .string(key)])
                }
            }
        case "phase":
            switch PhaseRequest.parse(body) {
            case .failure(let error): fail(context, .invalidAnalytics(error.message, index: nil))
            case .success(let phase):
                sendJSON(context, 200, ["cancelled": .array(service.phase(phase).map { .string($0) })])
            }
        default:  // flush
            service.flush(replyOn: loop) { [weak self, weak context] report in
                guard let self, let context else { return }
                self.sendJSON(
                    context, 200,
                    [
                        "sent": .number(JSONNumber(report.sent)), "dropped": .number(JSONNumber(report.dropped)),
                        "remaining": .number(JSONNumber(report.remaining)),
                        "deferred": report.deferredReason.map { .string($0) } ?? .null,
                    ])
            }
        }
    }

    /// Commits `values` and answers 202 only then (docs/analytics.md: durable before acknowledged).
    private func store(
        _ values: [AnalyticsValue], subject: String, context: ExchangeContext, service: AnalyticsService,
        extra: [String: JSONValue]
    ) {
        service.record(values, subject: subject, replyOn: loop) { [weak self, weak context] result in
            guard let self, let context else { return }
            switch result {
            case .success(let stored):
                service.recent.add(values)
                var fields = extra
                fields["accepted"] = .number(JSONNumber(values.count))
                fields["stored"] = .number(JSONNumber(stored))
                self.sendJSON(context, 202, fields)
            case .failure(let error) where error.isStorageFull:
                self.log.emit(.error, "analytics_store_full", [("error", .string("\(error)"))])
                self.fail(context, .analyticsStoreFull)
            case .failure(let error):
                self.log.emit(.error, "analytics_store_failed", [("error", .string("\(error)"))])
                self.fail(context, .analyticsStoreFailed)
            }
        }
    }

    private func withOperation(
        _ context: ExchangeContext, _ body: [UInt8], cancelOnAllowed: Bool, _ then: (OperationRequest) -> Void
    ) {
        switch OperationRequest.parse(body, requireCancelOnAllowed: cancelOnAllowed) {
        case .failure(let error): fail(context, .invalidAnalytics(error.message, index: error.index))
        case .success(let request): then(request)
        }
    }

    private func sendJSON(_ context: ExchangeContext, _ status: Int, _ fields: [String: JSONValue]) {
        var object = JSONObject()
        for key in fields.keys.sorted() { object[key] = fields[key] }
        send(context, status: status, headers: json, body: JSONValue.object(object).serializedBytes())
    }
}
