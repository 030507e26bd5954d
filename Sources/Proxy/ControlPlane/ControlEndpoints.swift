import EventLoop
import HTTPServer
import JSON

/// The `/_platform/` endpoints, answered by the proxy itself and never proxied.
struct ControlEndpoints {
    typealias Reply = (ExchangeContext, Int, [(name: String, value: String)], [UInt8]) -> Void
    /// Collects a request body (the handler's `collectBody`), then calls back with it.
    typealias Collect = (ExchangeContext, @escaping ([UInt8]) -> Void) -> Void
    /// Largest switch request body.
    static let maxBody = 65536

    private static let json: [(name: String, value: String)] = [
        ("Content-Type", "application/json"), ("Cache-Control", "no-store"),
    ]

    /// `POST /_platform/mock` (the method is checked by `PlatformEndpoints`).
    func switchMock(_ context: ExchangeContext, runtime: ProxyRuntime, reply: @escaping Reply, collect: Collect) {
        collect(context) { bytes in
            guard let body = try? JSONValue.parse(bytes) else {
                return error(context, .invalidRequest("The body is not valid JSON."), reply)
            }
            switchMock(context, body, runtime: runtime, reply: reply)
        }
    }

    /// `{"route": "name", "mode": "replay" | "record" | "off"}`: the QA switch.
    private func switchMock(_ context: ExchangeContext, _ body: JSONValue, runtime: ProxyRuntime, reply: Reply) {
        guard let name = body["route"]?.stringValue, let modeName = body["mode"]?.stringValue,
            let mode = MockSwitchboard.Mode(name: modeName)
        else {
            return error(
                context, .invalidRequest("Expected {\"route\": name, \"mode\": \"replay\"|\"record\"|\"off\"}."), reply)
        }
        guard let route = runtime.configuration.routes.first(where: { $0.name == name }) else {
            return error(context, .invalidRequest("No route is named \(name)."), reply)
        }
        guard route.mock != nil else {
            return error(context, .invalidRequest("The route \(name) has no mock directory."), reply)
        }
        // What check-config refuses in a release config cannot be switched on at run time either.
        guard runtime.configuration.profile != "release" || mode == .off else {
            return error(context, .mockNotAllowed, reply)
        }
        guard route.upstream != nil || mode == .replay else {
            return error(context, .invalidRequest("The route \(name) has no upstream, so it can only replay."), reply)
        }
        runtime.mockModes.set(mode, for: name)
        Log.emit(.info, "mock_switched", ["route": .string(name), "mode": .string(modeName)])
        reply(context, 200, Self.json, Array("{\"route\":\(jsonQuoted(name)),\"mode\":\"\(modeName)\"}".utf8))
    }

    private func error(_ context: ExchangeContext, _ error: ProxyError, _ reply: Reply) {
        let id = context.requestID
        reply(context, error.status, Self.json + (error.allow.map { [("Allow", $0)] } ?? []), error.body(requestID: id))
    }
}
