import Analytics
import Credentials
import EventLoop
import Experiments
import HTTPServer
import JSON

private let json: [(name: String, value: String)] = [
    ("Content-Type", "application/json"), ("Cache-Control", "no-store"),
]
private let prefix = "/_platform/experiments"

extension EndpointContext {

    /// `/_platform/experiments` and `/_platform/experiments/{name}`; false when `path` is neither.
    func handleExperimentEndpoint(_ context: ExchangeContext, path: Substring) -> Bool {
        guard path.hasPrefix(prefix) else { return false }
        let rest = path.dropFirst(prefix.count)
        guard rest.isEmpty || rest.first == "/" else { return false }
        guard let service = experimentService else {
            fail(context, .noRoute(String(path)))
            return true
        }
        let head = context.exchange.head
        let read = head.methodIs("GET") || head.methodIs("HEAD")
        let experiments = runtime.experiments
        let now = UnixTime.now()
        // The method was checked by `PlatformEndpoints`.
        if rest.isEmpty {
            let overrides = service.overrides().overrides
            let assignments = experiments.assignments(
                subject: service.subject(credentials).id, now: now, overrides: overrides)
            var object = JSONObject()
            for a in assignments { object[a.experiment] = .string(a.variant) }
            readAssignments(
                context, assignments, service: service, now: now, body: JSONValue.object(object).serializedBytes())
            return true
        }
        let name = rest.dropFirst()
        guard let plan = experiments.plan(named: name) else {
            fail(context, .unknownExperiment(String(name)))
            return true
        }
        if read {
            let a = experiments.assignment(
                plan, subject: service.subject(credentials).id, now: now, overrides: service.overrides().overrides)
            readAssignments(context, [a], service: service, now: now, body: assignmentBody(a, plan))
        } else if head.methodIs("PUT") {
            collectBody(context, limit: ControlEndpoints.maxBody) { [weak self, weak context] bytes in
                guard let self, let context else { return }
                self.override(context, plan, body: bytes, service: service)
            }
        } else {  // DELETE
            service.clearOverride(
                plan.name,
                saved: answerWhenSaved(context) { [weak self] in
                    guard let self else { return [] }
                    self.log.emit(.info, "experiment_override_cleared", [("experiment", .string(plan.name))])
                    let a = experiments.assignment(
                        plan, subject: service.subject(self.credentials).id, now: UnixTime.now(),
                        overrides: service.overrides().overrides)
                    return assignmentBody(a, plan)
                })
        }
        return true
    }

    /// `PUT {"variant": "new"}`: forces that variant of `plan` for everyone on this machine.
    private func override(_ context: ExchangeContext, _ plan: ExperimentPlan, body: [UInt8], service: ExperimentService)
    {
        guard let parsed = try? JSONValue.parse(body), let variant = parsed["variant"]?.stringValue else {
            return fail(context, .invalidRequest("Expected {\"variant\": name}."))
        }
        guard plan.variants.contains(variant) else {
            return fail(context, .unknownVariant(variant, experiment: plan.name, known: plan.variants))
        }
        service.setOverride(
            variant, for: plan.name,
            saved: answerWhenSaved(context) { [weak self] in
                self?.log.emit(
                    .info, "experiment_overridden", [("experiment", .string(plan.name)), ("variant", .string(variant))])
                return assignmentBody(Assignment(experiment: plan.name, variant: variant, reason: .override), plan)
            })
    }

    /// The completion for an override change: back on this loop, 200 with `body()` once the
    /// state file holds the change (so a crash right after the answer keeps it), else 500
    /// `experiments_state_not_saved` (the change is in force until the proxy stops).
    private func answerWhenSaved(_ context: ExchangeContext, _ body: @escaping () -> [UInt8]) -> ExperimentService.Saved
    {
        let reply = LoopBound(
            { [weak self, weak context] (error: TokenStoreError?) in
                guard let self, let context else { return }
                if let error {
                    self.log.emit(.error, "experiment_override_not_saved", [("error", .string(error.description))])
                    return self.fail(context, .experimentsStateNotSaved)
                }
                self.send(context, status: 200, headers: json, body: body())
            }, on: loop)
        return { error in reply.loop.execute { reply.value(error) } }
    }

    /// Answers a read after recording its exposures: the first read per subject per UTC day of
    /// each hashed assignment, only for a logged-in subject (the analytics API records nothing
    /// logged out) and only with analytics configured. Overridden and inactive ones never count.
    /// The answer waits for the commit, so a flush right after it uploads the exposure.
    private func readAssignments(
        _ context: ExchangeContext, _ assignments: [Assignment], service: ExperimentService,
        now: Double, body: [UInt8]
    ) {
        service.counters.served(assignments)
        let (subject, loggedIn) = service.subject(credentials)
        let exposable = assignments.filter(\.isExposure)
        guard loggedIn, let analytics, !exposable.isEmpty else {
            return send(context, status: 200, headers: json, body: body)
        }
        let day = ExposureLog.day(of: now)
        let claimed = service.claimExposures(exposable, subject: subject, day: day)
        guard !claimed.isEmpty else { return send(context, status: 200, headers: json, body: body) }
        let root = analytics.keys.root
        let values = claimed.map { a in
            AnalyticsValue(key: "\(root).experiment.\(a.experiment).\(a.variant)", value: "1", timestamp: Int64(now))
        }
        analytics.record(values, subject: subject, replyOn: loop) { [weak self, weak context] result in
            switch result {
            case .success: service.exposuresCommitted(claimed)
            case .failure(let error):
                service.releaseExposures(claimed, subject: subject, day: day)
                self?.log.emit(.error, "experiment_exposure_failed", [("error", .string("\(error)"))])
            }
            guard let self, let context else { return }
            self.send(context, status: 200, headers: json, body: body)
        }
    }
}

/// `{"experiment":…, "variant":…, "reason":"assigned"|"inactive"|"override", "variants":[…]}`.
private func assignmentBody(_ a: Assignment, _ plan: ExperimentPlan) -> [UInt8] {
    var object = JSONObject()
    object["experiment"] = .string(a.experiment)
    object["variant"] = .string(a.variant)
    object["reason"] = .string(a.reason.rawValue)
    object["variants"] = .array(plan.variants.map { .string($0) })
    return JSONValue.object(object).serializedBytes()
}
