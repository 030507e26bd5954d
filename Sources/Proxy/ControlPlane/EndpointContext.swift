import Analytics
import Credentials
import EventLoop
import Experiments

/// What the `/_platform/` endpoints work with on one loop: the runtime in force, the services
/// they answer for, the tokens they read and the ways to answer; not the forwarding state of the
/// handler behind it (`ProxyHandler` provides it). The endpoint table (`PlatformEndpoints`) and the
/// analytics, experiment, mock and probe endpoints see only this; the login endpoints, which keep
/// the providers' slots and login chains, are reached through their two entry points.
protocol EndpointContext: AnyObject {
    /// The runtime in force on this loop.
    var runtime: ProxyRuntime { get }
    /// The loop the endpoints answer on (asynchronous answers come back here).
    var loop: EventLoop { get }
    /// This loop's log buffer.
    var log: LogBuffer { get }
    /// The analytics sidecar, when configured.
    var analytics: AnalyticsService? { get }
    /// Experiment overrides, exposures and the installation id.
    var experimentService: ExperimentService? { get }
    /// The mock switch.
    var control: ControlEndpoints { get }
    /// The default provider's tokens in force (the experiments' subject).
    var credentials: CredentialSnapshot { get }
    /// The tokens analytics attributes events with.
    var analyticsCredentials: CredentialSnapshot { get }

    /// Answers with `body`, the request's `X-Request-ID` added to `headers`.
    func send(_ context: ExchangeContext, status: Int, headers: [(name: String, value: String)], body: [UInt8])
    /// Answers with the JSON error body.
    func fail(_ context: ExchangeContext, _ error: ProxyError)
    /// A probe's answer.
    func answer(_ probe: Probe, _ context: ExchangeContext)
    /// The Prometheus text.
    func scrapeMetrics(_ context: ExchangeContext)
    /// The login-related endpoints (`AuthEndpoints`); false when `path` is not one of them.
    func handleAuthEndpoint(_ context: ExchangeContext, path: Substring, query: Substring?) -> Bool
    /// The journey endpoints (`JourneyEndpoints`); false when `path` is not one of them.
    func handleJourneyEndpoint(_ context: ExchangeContext, path: Substring) -> Bool
    /// The console's page, state, request list and event stream (`ConsoleEndpoints`).
    func handleConsoleEndpoint(_ context: ExchangeContext, path: Substring)
}

extension EndpointContext {
    /// The reply function given to endpoint handlers: a whole JSON (or other) response.
    var reply: ControlEndpoints.Reply {
        { [unowned self] context, status, headers, body in
            self.send(context, status: status, headers: headers, body: body)
        }
    }

    /// Collects a request body up to `limit` bytes, then calls `then`; a larger body gets 413.
    func collectBody(_ context: ExchangeContext, limit: Int, _ then: @escaping ([UInt8]) -> Void) {
        let collected = CollectedBody(limit: limit)
        context.collected = collected
        context.afterBody = { [weak self, weak context] in
            guard let self, let context else { return }
            if collected.tooLarge { return self.fail(context, .bodyTooLarge) }
            then(collected.bytes)
        }
    }
}

extension ProxyHandler: EndpointContext {}
