import Credentials
import EventLoop
import JSON

extension ProxyHandler {
    private static let json: [(name: String, value: String)] = [("Content-Type", "application/json"), ("Cache-Control", "no-store")]

    /// The login-related `/_platform/` endpoints; false when `path` is not one of them.
    func handleAuthEndpoint(_ exchange: HTTPExchange, path: Substring, query: Substring?) -> Bool {
        // The method was checked by `PlatformEndpoints`.
        switch path {
        case "/_platform/auth":
            send(exchange, status: 200, headers: Self.json, body: authJSON())
        case "/_platform/auth/events":
            openEventStream(exchange)
        case "/_platform/login":
            guard let manager = managerOrFail(exchange) else { return true }
            manager.loginURL(replyOn: loop) { [weak self, weak exchange] result in
                guard let self, let exchange else { return }
                switch result {
                case .success(let url):
                    self.send(exchange, status: 302, headers: [("Location", url), ("Cache-Control", "no-store")], body: [])
                case .failure(let failure):
                    self.fail(exchange, .loginUnavailable(failure.message))
                }
            }
        case "/_platform/callback":
            guard let manager = managerOrFail(exchange) else { return true }
            manager.completeLogin(query: FormEncoding.decodeQuery(query ?? ""), replyOn: loop) { [weak self, weak exchange] result in
                guard let self, let exchange else { return }
                switch result {
                case .success: self.page(exchange, status: 200, title: "Signed in", text: "You are signed in. You can close this window.")
                case .failure(let failure): self.page(exchange, status: 400, title: "Sign-in failed", text: failure.message)
                }
            }
        case "/_platform/login/device":
            guard let manager = managerOrFail(exchange) else { return true }
            exchange.onEnd = { [weak self, weak exchange] in
                guard let self, let exchange else { return }
                manager.deviceLogin(replyOn: self.loop) { [weak self, weak exchange] result in
                    guard let self, let exchange else { return }
                    switch result {
                    case .success(let device):
                        var object = JSONObject()
                        object["user_code"] = .string(device.userCode)
                        object["verification_uri"] = .string(device.verificationURI)
                        object["verification_uri_complete"] = device.verificationURIComplete.map { .string($0) } ?? .null
                        object["expires_in"] = .number(JSONNumber(device.expiresIn))
                        object["interval"] = .number(JSONNumber(device.interval))
                        self.send(exchange, status: 200, headers: Self.json, body: JSONValue.object(object).serializedBytes())
                    case .failure(.refused(let reason)): self.fail(exchange, .loginUnavailable(reason))
                    case .failure(.unavailable(let reason)): self.fail(exchange, .loginServerUnavailable(reason))
                    }
                }
            }
        case "/_platform/login/demo":
            guard runtime.configuration.provider?.demo != nil, let manager = credentialManager else {
                fail(exchange, .loginUnavailable("No demo login is configured (provider.demo, with an OAuth grant)."))
                return true
            }
            exchange.onEnd = { [weak self, weak exchange] in
                guard let self, let exchange else { return }
                manager.demoLogin(replyOn: self.loop) { [weak self, weak exchange] result in
                    guard let self, let exchange else { return }
                    switch result {
                    case .success: self.send(exchange, status: 200, headers: Self.json, body: self.authJSON())
                    case .failure(let failure): self.fail(exchange, .loginFailed(failure.message))
                    }
                }
            }
        case "/_platform/logout":
            guard let manager = managerOrFail(exchange) else { return true }
            exchange.onEnd = { [weak self, weak exchange] in
                guard let self, let exchange else { return }
                manager.logout(replyOn: self.loop) { [weak self, weak exchange] revoked in
                    guard let self, let exchange else { return }
                    self.send(exchange, status: 200, headers: Self.json,
                              body: Array("{\"state\":\"logged_out\",\"revoked\":\(revoked)}".utf8))
                }
            }
        case "/_platform/userinfo":
            guard let manager = managerOrFail(exchange) else { return true }
            manager.userinfo(replyOn: loop) { [weak self, weak exchange] result in
                guard let self, let exchange else { return }
                switch result {
                case .success(let response):
                    self.send(exchange, status: response.status, headers: Self.json, body: response.body)
                case .failure(.refused): self.fail(exchange, .notLoggedIn)
                case .failure(.unavailable(let reason)): self.fail(exchange, .authServerUnreachable(reason))
                }
            }
        default:
            return false
        }
        return true
    }

    private func managerOrFail(_ exchange: HTTPExchange) -> CredentialManager? {
        if let credentialManager { return credentialManager }
        let grant = runtime.configuration.provider?.grant.rawValue
        fail(exchange, .loginUnavailable(grant.map { "The \($0) grant has no login: its tokens come from the config." }
                                         ?? "No provider is configured."))
        return nil
    }

    /// A small HTML page for the browser that finished (or failed) a login.
    private func page(_ exchange: HTTPExchange, status: Int, title: String, text: String) {
        let html = "<!doctype html><meta charset=utf-8><title>\(Self.escapeHTML(title))</title>"
            + "<h1>\(Self.escapeHTML(title))</h1><p>\(Self.escapeHTML(text))</p>"
        send(exchange, status: status, headers: [("Content-Type", "text/html; charset=utf-8"), ("Cache-Control", "no-store")],
             body: Array(html.utf8))
    }

    static func escapeHTML(_ text: String) -> String {
        var out = ""
        for c in text {
            switch c {
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "&": out += "&amp;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.append(c)
            }
        }
        return out
    }
}
