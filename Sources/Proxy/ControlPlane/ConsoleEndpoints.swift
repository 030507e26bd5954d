import Config
import EventLoop
import HTTPServer
import JSON

/// `/_platform/console`: the page (docs/console.md) and the two JSON reads it needs beyond the
/// existing endpoints. Every state change the page makes is a request to an endpoint that
/// already exists and is guarded as it is.
extension ProxyHandler {
    /// The page's own files: served without `X-Proxy-Key` (they hold no state; the page asks for
    /// the key and sends it on its requests), under every other guard of `/_platform/`.
    static let consoleAssets: [Substring: (type: String, body: [UInt8])] = [
        "/_platform/console": ("text/html; charset=utf-8", ConsoleAssets.html),
        "/_platform/console/app.js": ("text/javascript; charset=utf-8", ConsoleAssets.script),
        "/_platform/console/app.css": ("text/css; charset=utf-8", ConsoleAssets.style),
    ]

    /// Headers of every console answer: nothing loads from elsewhere, nothing frames it.
    static let consoleHeaders: [(name: String, value: String)] = [
        (
            "Content-Security-Policy",
            "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
                + "frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
        ),
        ("X-Frame-Options", "DENY"), ("X-Content-Type-Options", "nosniff"), ("Referrer-Policy", "no-referrer"),
        ("Cache-Control", "no-store"), ("Cross-Origin-Resource-Policy", "same-origin"),
    ]

    /// The console's endpoints (the method was checked by `PlatformEndpoints`): the page's
    /// files, its state, the request rings and the event stream.
    func handleConsoleEndpoint(_ context: ExchangeContext, path: Substring) {
        switch path {
        case "/_platform/console/state": consoleState(context)
        case "/_platform/console/requests": consoleRequests(context)
        case "/_platform/console/events": openConsoleEvents(context)
        default:
            guard let asset = Self.consoleAssets[path] else { return fail(context, .noRoute(String(path))) }
            send(context, status: 200, headers: [("Content-Type", asset.type)] + Self.consoleHeaders, body: asset.body)
        }
    }

    /// `GET /_platform/console/state`: the profile, the routes with their policies and mock
    /// modes, the last reload, the analytics queue. Names and settings only, never a secret.
    private func consoleState(_ context: ExchangeContext) {
        let configuration = runtime.configuration
        var object = JSONObject()
        object["profile"] = configuration.profile.map { .string($0) } ?? .null
        object["globalMock"] = .bool(configuration.mock)
        object["mockSwitchable"] = .bool(configuration.profile != "release")
        object["routes"] = .array(runtime.router.routes.map { consoleRoute($0) })
        var providers: [JSONValue] = []
        for named in configuration.providers {
            var provider = JSONObject()
            provider["name"] = .string(named.name)
            provider["grant"] = .string(named.configuration.grant.rawValue)
            provider["demo"] = .bool(named.configuration.demo != nil)
            providers.append(.object(provider))
        }
        object["providers"] = .array(providers)
        let reloads = hub.reloadStatus()
        object["reload"] = .object(
            JSONObject(uniqueKeysWithValues: [
                ("ok", .number(JSONNumber(reloads.ok))), ("failed", .number(JSONNumber(reloads.failed))),
                ("lastSucceeded", .bool(reloads.lastSucceeded)),
                ("lastSuccessTime", .number(JSONNumber(reloads.lastSuccessTime))),
                ("lastErrors", reloads.lastErrors.map { .string($0) } ?? .null),
            ]))
        if let analytics {
            let counters = analytics.counters
            object["analytics"] = .object(
                JSONObject(uniqueKeysWithValues: [
                    ("depth", .number(JSONNumber(counters.depth.load(ordering: .relaxed)))),
                    ("queued", .number(JSONNumber(counters.queued.load(ordering: .relaxed)))),
                    ("sent", .number(JSONNumber(counters.sent.load(ordering: .relaxed)))),
                    ("lastUpload", .number(JSONNumber(counters.lastUpload.load(ordering: .relaxed)))),
                    (
                        "lastProblem",
                        counters.lastProblem.withLock { $0 }.map {
                            .object(
                                JSONObject(uniqueKeysWithValues: [
                                    ("time", .number(JSONNumber($0.time))), ("reason", .string($0.reason)),
                                ]))
                        } ?? .null
                    ),
                    ("droppedRejected", .number(JSONNumber(counters.droppedRejected.load(ordering: .relaxed)))),
                    (
                        "latest",
                        .array(
                            analytics.recent.latest().map { value in
                                .object(
                                    JSONObject(uniqueKeysWithValues: [
                                        ("key", .string(value.key)), ("value", .string(value.value)),
                                        ("timestamp", .number(JSONNumber(value.timestamp))),
                                    ]))
                            })
                    ),
                ]))
        } else {
            object["analytics"] = .null
        }
        if let service = experimentService {
            // Read as `GET /_platform/experiments` decides, without counting an exposure: looking
            // at the console is not the app using a variant.
            let subject = service.subject(credentials).id, overrides = service.overrides().overrides,
                now = UnixTime.now()
            object["experiments"] = .array(
                runtime.experiments.plans.map { plan in
                    let weights = plan.ranges.map {
                        JSONValue.number(JSONNumber((($0.end - $0.start) * 1000).rounded() / 1000))
                    }
                    let assignment = runtime.experiments.assignment(
                        plan, subject: subject, now: now, overrides: overrides)
                    return .object(
                        JSONObject(uniqueKeysWithValues: [
                            ("name", .string(plan.name)), ("variants", .array(plan.variants.map { .string($0) })),
                            ("weights", .array(weights)),
                            ("variant", .string(assignment.variant)), ("reason", .string(assignment.reason.rawValue)),
                        ]))
                })
        } else {
            object["experiments"] = .null
        }
        send(
            context, status: 200, headers: [("Content-Type", "application/json")] + Self.consoleHeaders,
            body: JSONValue.object(object).serializedBytes())
    }

    private func consoleRoute(_ route: CompiledRoute) -> JSONValue {
        let config = route.config
        var object = JSONObject()
        object["name"] = .string(config.name)
        object["path"] = .string(config.path)
        object["upstream"] = config.upstream.map { .string($0.origin) } ?? .null
        object["credential"] = .string(config.credential.rawValue)
        object["provider"] = .string(route.provider ?? "")
        object["retryOn401"] = .bool(config.retryOn401)
        object["followRedirects"] = .bool(config.redirects.follow)
        object["timeoutSeconds"] = .number(JSONNumber(config.timeoutSeconds))
        if config.mock != nil {
            object["mock"] = .string(runtime.mockMode(route)?.rawValue ?? "off")
            object["mockReplayOnly"] = .bool(config.upstream == nil)
        } else {
            object["mock"] = .null
        }
        return .object(object)
    }

    /// `GET /_platform/console/requests`: every loop's ring, newest first.
    private func consoleRequests(_ context: ExchangeContext) {
        hub.gatherRequests(on: loop) { [weak self, weak context] records in
            guard let self, let context else { return }
            let list = records.sorted { $0.record.time > $1.record.time }.map { $0.record.json(loop: $0.loop) }
            let body = JSONValue.object(JSONObject(uniqueKeysWithValues: [("requests", .array(list))]))
                .serializedBytes()
            self.send(
                context, status: 200, headers: [("Content-Type", "application/json")] + Self.consoleHeaders, body: body)
        }
    }

    /// Keeps a finished exchange in this loop's ring (`forwarded`: its forwarding, when it was
    /// forwarded); the console's own traffic and the probes are left out (they would push the
    /// app's requests out of the ring).
    func recordForConsole(_ context: ExchangeContext, _ forwarded: ForwardedExchange?, status: Int, seconds: Double) {
        let route = context.route
        if let route, route == "_platform" || route == Probe.route { return }
        let exchange = context.exchange
        // Written into the ring's slot in place: a record built aside would be copied in.
        requestRing.record { record in
            record.time = UnixTime.now()
            // The usual methods are constant strings: nothing is made per request.
            record.method = exchange.head.method
            record.path = Self.loggedPath(context.path)
            record.route = route ?? ""
            record.status = status
            record.micros = Int((seconds * 1e6).rounded())
            if let forwarded {
                (record.credentials, record.hops, record.maskedEchoes) = forwarded.consoleFacts
                record.upstream = forwarded.url.origin
            } else if let tunnel = exchange.delegate as? Tunnel, tunnel.upstreamAnswered {
                // An upgrade's handshake, answered by its upstream (a 101, or a refusal relayed):
                // it went up with the route's credentials.
                (record.hops, record.maskedEchoes, record.upstream) = (0, 0, tunnel.identity.upstream)
                record.credentials = tunnel.identity.provider == nil ? .noProvider : .injected
            } else {
                (record.hops, record.maskedEchoes, record.upstream) = (0, 0, "")
                if let slot = context.slot {
                    record.credentials =
                        runtime.mockMode(slot.route) == .replay
                        ? .mock
                        : slot.route.config.credential == .none ? .noProvider : .gated
                } else {
                    record.credentials = .noProvider
                }
            }
        }
    }
}

extension MetricsHub {
    /// Asks every loop for its ring and calls `completion` on `loop` with their records, each
    /// with its loop's index.
    func gatherRequests(on loop: EventLoop, _ completion: @escaping ([(loop: Int, record: RequestRecord)]) -> Void) {
        let rings = requestRings
        let box = RequestGather(remaining: rings.count, completion: completion)
        for (index, member) in rings.enumerated() {
            let ring = member.ring
            member.loop.execute {
                let records = ring.snapshot()
                loop.execute {
                    box.records.append(contentsOf: records.map { (index, $0) })
                    box.remaining -= 1
                    if box.remaining == 0 { box.completion(box.records) }
                }
            }
        }
    }
}

/// The records gathered so far from the loops (touched on the asking loop only).
private final class RequestGather: @unchecked Sendable {
    var remaining: Int
    var records: [(loop: Int, record: RequestRecord)] = []
    let completion: ([(loop: Int, record: RequestRecord)]) -> Void

    init(remaining: Int, completion: @escaping ([(loop: Int, record: RequestRecord)]) -> Void) {
        self.remaining = remaining
        self.completion = completion
    }
}
