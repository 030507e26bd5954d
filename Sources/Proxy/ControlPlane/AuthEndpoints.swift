import Config
import Credentials
import EventLoop
import HTTPServer
import JSON

extension ProxyHandler {
    private static let json: [(name: String, value: String)] = [
        ("Content-Type", "application/json"), ("Cache-Control", "no-store"),
    ]

    /// The login-related `/_platform/` endpoints; false when `path` is not one of them.
    /// `?provider=<name>` picks one provider on login, device, demo, logout and userinfo.
    func handleAuthEndpoint(_ context: ExchangeContext, path: Substring, query: Substring?) -> Bool {
        // The method was checked by `PlatformEndpoints`.
        let parameters = FormEncoding.decodeQuery(query ?? "")
        // A `provider` parameter must name a configured provider; nil when absent.
        var named: String?
        switch path {
        case "/_platform/login", "/_platform/login/device", "/_platform/login/demo", "/_platform/logout",
            "/_platform/userinfo":
            if let name = parameters.first(where: { $0.0 == "provider" })?.1 {
                guard runtime.configuration.provider(named: name) != nil else {
                    fail(context, .unknownProvider(name, known: providerNames))
                    return true
                }
                named = name
            }
        default:
            break
        }
        switch path {
        case "/_platform/auth":
            send(context, status: 200, headers: Self.json, body: authJSON())
        case "/_platform/auth/events":
            openEventStream(context)
        case "/_platform/login":
            if named == nil && severalProviders {
                startPhasedLogin(context)
                return true
            }
            guard let manager = managerOrFail(context, named) else { return true }
            redirectToLogin(context, manager, chain: nil) { handler, context, reason in
                handler.fail(context, .loginUnavailable(reason))
            }
        case "/_platform/callback":
            callback(context, query: parameters)
        case "/_platform/login/device":
            guard let manager = managerOrFail(context, named) else { return true }
            context.afterBody = { [weak self, weak context] in
                guard let self, let context else { return }
                manager.deviceLogin(replyOn: self.loop) { [weak self, weak context] result in
                    guard let self, let context else { return }
                    switch result {
                    case .success(let device):
                        var object = JSONObject()
                        object["user_code"] = .string(device.userCode)
                        object["verification_uri"] = .string(device.verificationURI)
                        object["verification_uri_complete"] =
                            device.verificationURIComplete.map { .string($0) } ?? .null
                        object["expires_in"] = .number(JSONNumber(device.expiresIn))
                        object["interval"] = .number(JSONNumber(device.interval))
                        object["provider"] = .string(manager.name)
                        self.send(
                            context, status: 200, headers: Self.json, body: JSONValue.object(object).serializedBytes())
                    case .failure(.refused(let reason)): self.fail(context, .loginUnavailable(reason))
                    case .failure(.unavailable(let reason)): self.fail(context, .loginServerUnavailable(reason))
                    }
                }
            }
        case "/_platform/login/demo":
            let provider =
                named.flatMap { runtime.configuration.provider(named: $0) } ?? runtime.configuration.defaultProvider
            guard let provider, provider.configuration.demo != nil, let manager = slot(provider.name).manager else {
                fail(context, .loginUnavailable("No demo login is configured (provider.demo, with an OAuth grant)."))
                return true
            }
            context.afterBody = { [weak self, weak context] in
                guard let self, let context else { return }
                manager.demoLogin(replyOn: self.loop) { [weak self, weak context] result in
                    guard let self, let context else { return }
                    switch result {
                    case .success: self.send(context, status: 200, headers: Self.json, body: self.authJSON())
                    case .failure(let failure): self.fail(context, .loginFailed(failure.message))
                    }
                }
            }
        case "/_platform/logout":
            let managers: [CredentialManager]
            if named == nil && severalProviders {
                // No parameter: every provider with a login to end.
                managers = providerNames.compactMap { slot($0).manager }
                // Only static providers: nothing can be logged out (as with one static provider).
                guard !managers.isEmpty else { return managerOrFail(context, nil) == nil }
            } else {
                guard let manager = managerOrFail(context, named) else { return true }
                managers = [manager]
            }
            context.afterBody = { [weak self, weak context] in
                guard let self, let context else { return }
                self.logout(managers) { [weak self, weak context] revoked in
                    guard let self, let context else { return }
                    var object = JSONObject()
                    object["state"] = .string("logged_out")
                    object["revoked"] = .bool(revoked.contains { $0.1 })
                    if self.severalProviders {
                        var each = JSONObject()
                        for (name, flag) in revoked {
                            each[name] = .object(JSONObject(uniqueKeysWithValues: [("revoked", .bool(flag))]))
                        }
                        object["providers"] = .object(each)
                    }
                    self.send(
                        context, status: 200, headers: Self.json, body: JSONValue.object(object).serializedBytes())
                }
            }
        case "/_platform/userinfo":
            guard let manager = managerOrFail(context, named) else { return true }
            manager.userinfo(replyOn: loop) { [weak self, weak context] result in
                guard let self, let context else { return }
                switch result {
                case .success(let response):
                    self.send(context, status: response.status, headers: Self.json, body: response.body)
                case .failure(.refused): self.fail(context, .notLoggedIn)
                case .failure(.unavailable(let reason)): self.fail(context, .authServerUnreachable(reason))
                }
            }
        default:
            return false
        }
        return true
    }

    /// Logs out of each of `managers` in turn; `done` gets (provider, refresh token revoked) in order.
    private func logout(_ managers: [CredentialManager], done: @escaping ([(String, Bool)]) -> Void) {
        var results: [(String, Bool)] = []
        func next(_ index: Int) {
            guard index < managers.count else { return done(results) }
            managers[index].logout(replyOn: loop) { revoked in
                results.append((managers[index].name, revoked))
                next(index + 1)
            }
        }
        next(0)
    }

    /// The manager of provider `name` (nil: the default provider), or an answered error.
    private func managerOrFail(_ context: ExchangeContext, _ name: String?) -> CredentialManager? {
        let provider =
            name.flatMap { runtime.configuration.provider(named: $0) } ?? runtime.configuration.defaultProvider
        if let provider, let manager = slot(provider.name).manager { return manager }
        let message: String
        switch provider?.configuration.grant {
        case nil: message = "No provider is configured."
        case .staticTokens?: message = "The static grant has no login: its tokens come from the config."
        case let grant?:
            // An OAuth provider with no manager came with a reload: its lifecycle starts at the next start.
            message =
                "The provider \(provider!.name) (\(grant.rawValue)) was added or changed by a reload and "
                + "takes effect after a restart."
        }
        fail(context, .loginUnavailable(message))
        return nil
    }

    /// A small HTML page for the browser that finished (or failed) a login.
    func page(_ context: ExchangeContext, status: Int, title: String, text: String) {
        let html =
            "<!doctype html><meta charset=utf-8><title>\(Self.escapeHTML(title))</title>"
            + "<h1>\(Self.escapeHTML(title))</h1><p>\(Self.escapeHTML(text))</p>"
        send(
            context, status: status,
            headers: [("Content-Type", "text/html; charset=utf-8"), ("Cache-Control", "no-store")],
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
