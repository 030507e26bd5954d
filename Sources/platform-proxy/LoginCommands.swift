import Config
import EventLoop
import Glibc
import JSON
import Upstream

/// The `login`, `status` and `logout` commands: they talk to the running proxy named by the
/// config (its first listener, with its `apiKey`), so the proxy stays the only token holder.
public enum LoginCommands {
    /// `status`: prints the login state without secrets; exit 0 logged in, 1 not, 2 proxy unreachable.
    public static func status(config location: ConfigLocation) -> Int32 {
        guard let (target, config) = target(location), let auth = fetchAuth(target) else { return 2 }
        if case .success(let health) = BlockingHTTP.request("GET", "/_platform/health", to: target, timeout: 5),
            let profile = (try? JSONValue.parse(health.body))?["profile"]?.stringValue
        {
            say("profile: \(profile)")
        }
        if config.providers.count > 1 {
            say(table(auth))
            return allLoggedIn(auth) ? 0 : 1
        }
        describe(auth, grant: config.provider?.grant)
        return auth["loggedIn"]?.boolValue == true ? 0 : 1
    }

    /// The running proxy's `/_platform/auth`, or nil after saying why not: it is not reachable,
    /// or it refused the command (a wrong or missing `apiKey` in the config given).
    static func fetchAuth(_ target: BlockingHTTP.Target) -> JSONValue? {
        switch BlockingHTTP.request("GET", "/_platform/auth", to: target, timeout: 5) {
        case .failure(let error):
            say("platform-proxy is not reachable at \(target.unixSocket ?? target.baseURL): \(error)")
            return nil
        case .success(let response) where response.status != 200:
            say("platform-proxy refused (HTTP \(response.status)): \(message(response.body))")
            return nil
        case .success(let response):
            guard let auth = try? JSONValue.parse(response.body) else {
                say("unexpected answer (HTTP \(response.status)) from \(target.baseURL)/_platform/auth")
                return nil
            }
            return auth
        }
    }

    /// `login`: prints the proxy's login URL (or starts a device login) and waits for `logged_in`.
    /// `provider` names one provider to sign into (any number configured).
    public static func login(config location: ConfigLocation, device: Bool, provider: String? = nil) -> Int32 {
        guard let (target, config) = target(location) else { return 2 }
        if let provider {
            guard let named = config.provider(named: provider) else {
                say(
                    "No provider is named \(provider) (configured: \(config.providers.map(\.name).joined(separator: ", ")))."
                )
                return 2
            }
            return loginOne(target, named, device: device)
        }
        guard let auth = fetchAuth(target) else { return 2 }
        if config.providers.count > 1 { return loginAll(target, auth: auth, device: device, location: location) }
        if auth["loggedIn"]?.boolValue == true {
            describe(auth, grant: config.provider?.grant)
            return 0
        }
        if device {
            switch BlockingHTTP.request("POST", "/_platform/login/device", to: target, timeout: 30) {
            case .success(let response) where response.status == 200:
                guard let body = try? JSONValue.parse(response.body) else { return 1 }
                say(
                    "Go to \(body["verification_uri"]?.stringValue ?? "?") and enter the code \(body["user_code"]?.stringValue ?? "?")"
                )
                if let complete = body["verification_uri_complete"]?.stringValue { say("(or open \(complete))") }
            case .success(let response):
                say("The device login could not start (HTTP \(response.status)): \(message(response.body))")
                return 1
            case .failure(let error):
                say("platform-proxy is not reachable: \(error)")
                return 2
            }
        } else {
            say("Open this URL in a browser to sign in:\n  \(target.baseURL)/_platform/login")
        }
        say("Waiting for the login to complete …")
        var buffer: [UInt8] = []
        var signedIn: JSONValue?
        // A new error while still logged out ends the wait (a device login refused or expired).
        // The device login just started cleared any earlier one; in a browser login, the error
        // already there when the stream opens is old news.
        var firstError: String?? = device ? .some(nil) : nil
        var failed: String?
        let result = BlockingHTTP.request("GET", "/_platform/auth/events", to: target, timeout: 600) { bytes in
            buffer.append(contentsOf: bytes)
            // Each event ends with a blank line; its data line holds the auth JSON.
            while let end = findBlankLine(buffer) {
                let event = String(decoding: buffer[..<end], as: UTF8.self)
                buffer.removeFirst(end + 2)
                for line in event.split(separator: "\n") where line.hasPrefix("data: ") {
                    guard let auth = try? JSONValue.parse(String(line.dropFirst(6))) else { continue }
                    if auth["loggedIn"]?.boolValue == true {
                        signedIn = auth
                        return false
                    }
                    let error = auth["lastError"]?.stringValue
                    guard let known = firstError else {
                        firstError = .some(error)
                        continue
                    }
                    if let error, error != known {
                        failed = error
                        return false
                    }
                }
            }
            return true
        }
        if let signedIn {
            describe(signedIn, grant: config.provider?.grant)
            return 0
        }
        if let failed {
            say("Not signed in: \(failed)")
            return 1
        }
        if case .failure(let error) = result { say("the event stream ended: \(error)") }
        return 1
    }

    /// `logout`: revokes and forgets the login in the running proxy.
    public static func logout(config location: ConfigLocation, provider: String? = nil) -> Int32 {
        guard let (target, _) = target(location) else { return 2 }
        let query = provider.map { "?provider=" + FormEncodingText.escape($0) } ?? ""
        switch BlockingHTTP.request("POST", "/_platform/logout" + query, to: target, timeout: 30) {
        case .success(let response) where response.status == 200:
            let body = try? JSONValue.parse(response.body)
            if let each = body?["providers"]?.objectValue {
                for (name, result) in each {
                    say(
                        "Logged out of \(name) (refresh token revoked: \(result["revoked"]?.boolValue == true ? "yes" : "no"))."
                    )
                }
                return 0
            }
            say("Logged out (refresh token revoked: \(body?["revoked"]?.boolValue == true ? "yes" : "no")).")
            return 0
        case .success(let response):
            say("logout refused (HTTP \(response.status)): \(message(response.body))")
            return 1
        case .failure(let error):
            say("platform-proxy is not reachable: \(error)")
            return 2
        }
    }

    /// Writes a line to stdout at once: `login` waits afterwards, and a buffered line would
    /// never reach a pipe or a log while it does.
    static func say(_ text: String) { writeOut(text + "\n") }

    /// Writes `text` to stdout unbuffered, retrying short writes and EINTR.
    /// Control characters other than newline and tab are dropped: the text may come from the
    /// identity provider (journey prompts, messages), and an escape sequence must not reach the
    /// terminal (it could rewrite what the user sees, or the window title).
    static func writeOut(_ text: String) {
        var bytes = Array(text.utf8).filter { $0 >= 0x20 && $0 != 0x7F || $0 == 0x0A || $0 == 0x09 }
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeMutableBytes { write(1, $0.baseAddress! + offset, $0.count - offset) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return }
            offset += n
        }
    }

    static func describe(_ auth: JSONValue, grant: ProviderConfiguration.Grant?) {
        say("state: \(auth["state"]?.stringValue ?? "?")")
        if let subject = auth["subject"]?.stringValue { say("subject: \(subject)") }
        let expires = auth["expiresAt"]?.doubleValue
        if grant == .staticTokens {
            // Static tokens are whatever the config names; the proxy neither refreshes nor expires them.
            say("access token: static token (no expiry: the proxy uses it as configured)")
            if let expires { say("id_token exp claim: \(TimeText.describe(expires, now: Double(time(nil))))") }
        } else if let expires {
            say("access token expires: \(TimeText.describe(expires, now: Double(time(nil))))")
        }
        if let error = auth["lastError"]?.stringValue { say("last error: \(error)") }
    }

    /// The `message` of a JSON error body, else the body as text.
    static func message(_ body: [UInt8]) -> String {
        (try? JSONValue.parse(body))?["message"]?.stringValue ?? String(decoding: body, as: UTF8.self)
    }

    static func findBlankLine(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 2 else { return nil }
        for i in 0..<(bytes.count - 1) where bytes[i] == 0x0A && bytes[i + 1] == 0x0A { return i }
        return nil
    }

    /// The running proxy's address from the config: its first listener, and its key.
    static func target(_ location: ConfigLocation) -> (BlockingHTTP.Target, ProxyConfiguration)? {
        // The address and the key are all the command needs: the other secrets (a client secret
        // in the service's environment) stay unread, so an operator's shell need not hold them.
        switch location.load(schemaOnly: true) {
        case .failure(let errors):
            Log.writeStandardError("\(location.path):\n\(errors)\n")
            return nil
        case .success(let config):
            return address(config).map { ($0, config) }
        }
    }

    private static func address(_ config: ProxyConfiguration) -> BlockingHTTP.Target? {
        var key: [String] = []
        if let source = config.apiKey {
            do {
                key = ["X-Proxy-Key: \(try source.resolve())"]
            } catch {
                Log.writeStandardError("apiKey: \(error.message)\n")
                return nil
            }
        }
        switch config.listen.first {
        case .unix(let path)?:
            return BlockingHTTP.Target(baseURL: "http://localhost", unixSocket: path, headers: key)
        case .tcp(let host, let port)?:
            let reachable = host == "0.0.0.0" ? "127.0.0.1" : host == "::" ? "::1" : host
            let authority = reachable.contains(":") ? "[\(reachable)]:\(port)" : "\(reachable):\(port)"
            return BlockingHTTP.Target(baseURL: "http://\(authority)", unixSocket: nil, headers: key)
        case nil:
            return nil
        }
    }
}
