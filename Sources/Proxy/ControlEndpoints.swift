import EventLoop
import JSON

/// The `/_platform/` endpoints, answered by the proxy itself and never proxied.
struct ControlEndpoints {
    typealias Reply = (HTTPExchange, Int, [(name: String, value: String)], [UInt8]) -> Void

    private static let json: [(name: String, value: String)] = [("Content-Type", "application/json"), ("Cache-Control", "no-store")]
    private static let healthBody = Array("{\"status\":\"ok\"}".utf8)

    func handle(_ exchange: HTTPExchange, path: Substring, runtime: ProxyRuntime, reply: @escaping Reply) {
        let isRead = exchange.head.methodIs("GET") || exchange.head.methodIs("HEAD")
        switch path {
        case "/_platform/health":
            guard isRead else { return methodNotAllowed(exchange, "GET", reply) }
            reply(exchange, 200, Self.json, Self.healthBody)
        case "/_platform/ready":
            guard isRead else { return methodNotAllowed(exchange, "GET", reply) }
            if let reason = runtime.unreadyReason() {
                reply(exchange, 503, Self.json, Array("{\"status\":\"not_ready\",\"reason\":\(jsonQuoted(reason))}".utf8))
            } else {
                reply(exchange, 200, Self.json, Array("{\"status\":\"ready\"}".utf8))
            }
        default:
            error(exchange, .noRoute(String(path)), reply)
        }
    }

    private func methodNotAllowed(_ exchange: HTTPExchange, _ allowed: String, _ reply: Reply) {
        error(exchange, .methodNotAllowed(allowed), reply, extra: [("Allow", allowed)])
    }

    private func error(_ exchange: HTTPExchange, _ error: ProxyError, _ reply: Reply, extra: [(name: String, value: String)] = []) {
        let id = exchange.info?.requestID ?? ""
        reply(exchange, error.status, Self.json + extra, error.body(requestID: id))
    }
}
