import EventLoop
import HTTPServer
import JSON

/// The probes and the metrics scrape, on the proxy's listeners and on the `metricsListen` address.
extension ProxyHandler {
    /// The `metricsListen` address serves metrics, health and readiness only, with no Host or key
    /// check: it is the operator's choice of where a scraper reaches, and it serves no credential.
    func handleMetricsListener(_ context: ExchangeContext, target: RequestTarget) {
        context.route = Probe.route
        Self.metricsListenerEndpoints.dispatch(context, target: target, on: self)
    }

    /// A probe's answer (the method was checked by `PlatformEndpoints`).
    func answer(_ probe: Probe, _ context: ExchangeContext) {
        switch probe {
        case .health: send(context, status: 200, headers: Probe.headers, body: runtime.healthBody)
        case .ready: ready(context)
        }
    }

    private func ready(_ context: ExchangeContext) {
        let headers: [(name: String, value: String)] = [
            ("Content-Type", "application/json"), ("Cache-Control", "no-store"),
        ]
        if let reason = unreadyReason() ?? analytics?.unreadyReason() {
            send(
                context, status: 503, headers: headers,
                body: Array("{\"status\":\"not_ready\",\"reason\":\(jsonQuoted(reason))}".utf8))
        } else if let notices = analytics?.notices, !notices.isEmpty {
            // Ready, with what an operator should know: `notices` names conditions that need no action to serve.
            let list = notices.map(jsonQuoted).joined(separator: ",")
            send(
                context, status: 200, headers: headers, body: Array("{\"status\":\"ready\",\"notices\":[\(list)]}".utf8)
            )
        } else {
            send(context, status: 200, headers: headers, body: Array("{\"status\":\"ready\"}".utf8))
        }
    }

    /// The Prometheus text (the method was checked by `PlatformEndpoints`).
    func scrapeMetrics(_ context: ExchangeContext) {
        let providers = runtime.configuration.providers.map {
            ProviderGauge(name: $0.name, status: slot($0.name).snapshot.status)
        }
        hub.gather(on: loop, providers: providers) { [weak self, weak context] text in
            guard let self, let context else { return }
            self.send(
                context, status: 200, headers: [("Content-Type", "text/plain; version=0.0.4; charset=utf-8")],
                body: Array(text.utf8))
        }
    }
}
