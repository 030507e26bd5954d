import EventLoop
import HTTP1
import HTTPServer

/// The proxy's own endpoints as one table: path → methods → handler (hummingbird's `Router.on`
/// is the model). `dispatch` finds the first entry whose path matches, answers 404 when its
/// resource is absent, 405 with `Allow` when the method is not one of the entry's, and otherwise
/// calls its handler; a path no entry matches is a 404 `no_route`. Built once; a request
/// allocates nothing here.
struct PlatformEndpoints {
    /// A method an endpoint takes; `get` takes HEAD too (not listed in `Allow`).
    enum Method: String, Sendable {
        case get = "GET", post = "POST", put = "PUT", delete = "DELETE"

        func matches(_ head: HTTPRequestHead) -> Bool {
            switch self {
            case .get: head.methodIs("GET") || head.methodIs("HEAD")
            case .post: head.methodIs("POST")
            case .put: head.methodIs("PUT")
            case .delete: head.methodIs("DELETE")
            }
        }
    }

    /// Which paths an entry answers.
    enum Path: Sendable, Equatable {
        /// This path only.
        case exact(String)
        /// This path and every path below it (`/p` and `/p/…`, not `/pX`).
        case subtree(String)
        /// Paths starting with this prefix (which ends in "/").
        case below(String)

        func matches(_ path: Substring) -> Bool {
            switch self {
            case .exact(let p): return path == p
            case .subtree(let p):
                guard path.hasPrefix(p) else { return false }
                let rest = path.dropFirst(p.count)
                return rest.isEmpty || rest.first == "/"
            case .below(let p): return path.hasPrefix(p)
            }
        }
    }

    /// Answers the request; the method is one of the entry's.
    typealias Handler = @Sendable (any EndpointContext, ExchangeContext, RequestTarget) -> Void
    /// The error for a path whose resource is absent (no analytics configured, no such
    /// experiment), checked before the method; nil when it exists.
    typealias Resource = @Sendable (any EndpointContext, Substring) -> ProxyError?

    struct Endpoint: Sendable {
        let path: Path
        let methods: [Method]
        let resource: Resource?
        let handler: Handler
        /// The `Allow` value of a 405.
        let allow: String
    }

    private(set) var endpoints: [Endpoint] = []

    init(_ build: (inout PlatformEndpoints) -> Void) { build(&self) }

    /// Adds an entry; earlier entries win.
    mutating func on(_ path: Path, _ methods: [Method], unless missing: Resource? = nil, use handler: @escaping Handler)
    {
        endpoints.append(
            Endpoint(
                path: path, methods: methods, resource: missing, handler: handler,
                allow: methods.map(\.rawValue).joined(separator: ", ")))
    }

    /// The entry answering `path`, if any.
    func endpoint(for path: Substring) -> Endpoint? { endpoints.first { $0.path.matches(path) } }

    /// Answers `context`'s exchange from the table.
    func dispatch(_ context: ExchangeContext, target: RequestTarget, on handler: any EndpointContext) {
        guard let endpoint = endpoint(for: target.path) else {
            return handler.fail(context, .noRoute(String(target.path)))
        }
        if let missing = endpoint.resource?(handler, target.path) { return handler.fail(context, missing) }
        let head = context.exchange.head
        guard endpoint.methods.contains(where: { $0.matches(head) }) else {
            return handler.fail(context, .methodNotAllowed(endpoint.allow))
        }
        endpoint.handler(handler, context, target)
    }
}

extension ProxyHandler {
    /// `/_platform/…` on the proxy's listeners, after the guards (the probes too: their guard
    /// list is shorter, their table entry the same).
    static let platformEndpoints = PlatformEndpoints { table in
        table.on(.exact("/_platform/health"), [.get]) { proxy, context, _ in proxy.answer(.health, context) }
        table.on(.exact("/_platform/ready"), [.get]) { proxy, context, _ in proxy.answer(.ready, context) }
        table.on(.exact("/_platform/metrics"), [.get]) { proxy, context, _ in proxy.scrapeMetrics(context) }
        table.on(.subtree("/_platform/login/journey"), [.post]) { proxy, context, target in
            _ = proxy.handleJourneyEndpoint(context, path: target.path)
        }
        for path in [
            "/_platform/auth", "/_platform/auth/events", "/_platform/login", "/_platform/callback",
            "/_platform/userinfo",
        ] {
            table.on(.exact(path), [.get]) { proxy, context, target in
                _ = proxy.handleAuthEndpoint(context, path: target.path, query: target.query)
            }
        }
        for path in ["/_platform/login/device", "/_platform/login/demo", "/_platform/logout"] {
            table.on(.exact(path), [.post]) { proxy, context, target in
                _ = proxy.handleAuthEndpoint(context, path: target.path, query: target.query)
            }
        }
        table.on(
            .below("/_platform/analytics/"), [.post],
            unless: { proxy, path in
                proxy.analytics == nil ? .noRoute(String(path)) : nil
            }
        ) { proxy, context, target in
            _ = proxy.handleAnalyticsEndpoint(context, path: target.path)
        }
        table.on(
            .exact("/_platform/experiments"), [.get],
            unless: { proxy, path in
                proxy.experimentService == nil ? .noRoute(String(path)) : nil
            }
        ) { proxy, context, target in
            _ = proxy.handleExperimentEndpoint(context, path: target.path)
        }
        table.on(
            .below("/_platform/experiments/"), [.get, .put, .delete],
            unless: { proxy, path in
                guard proxy.experimentService != nil else { return .noRoute(String(path)) }
                let name = path.dropFirst("/_platform/experiments/".count)
                return proxy.runtime.experiments.plan(named: name) == nil ? .unknownExperiment(String(name)) : nil
            }
        ) { proxy, context, target in
            _ = proxy.handleExperimentEndpoint(context, path: target.path)
        }
        for path in ProxyHandler.consoleAssets.keys.map(String.init) + [
            "/_platform/console/state", "/_platform/console/requests",
            "/_platform/console/events",
        ] {
            table.on(.exact(path), [.get]) { proxy, context, target in
                proxy.handleConsoleEndpoint(context, path: target.path)
            }
        }
        table.on(.exact("/_platform/mock"), [.post]) { proxy, context, _ in
            proxy.control.switchMock(context, runtime: proxy.runtime, reply: proxy.reply) { context, then in
                proxy.collectBody(context, limit: ControlEndpoints.maxBody, then)
            }
        }
    }

    /// The `metricsListen` address: metrics, health and readiness only, with no Host or key check.
    static let metricsListenerEndpoints = PlatformEndpoints { table in
        for path in ["/metrics", "/_platform/metrics"] {
            table.on(.exact(path), [.get]) { proxy, context, _ in proxy.scrapeMetrics(context) }
        }
        table.on(.exact("/_platform/health"), [.get]) { proxy, context, _ in proxy.answer(.health, context) }
        table.on(.exact("/_platform/ready"), [.get]) { proxy, context, _ in proxy.answer(.ready, context) }
    }
}
