import Config
import EventLoop
import Glibc
import JSON
import Upstream

/// `status`, `login` and `logout` when the config names several providers: a table with one
/// row per provider, and one login for every provider that needs one (docs/login.md, "Phased login").
extension LoginCommands {
    /// The providers of an `/_platform/auth` answer, in its order.
    static func providers(_ auth: JSONValue) -> [(name: String, fields: JSONValue)] {
        guard let object = auth["providers"]?.objectValue else { return [] }
        return object.map { ($0.key, $0.value) }
    }

    /// A provider name made safe for a query (names are letters, digits, '_' and '-'; anything
    /// else given on the command line is percent-encoded).
    enum FormEncodingText {
        static func escape(_ text: String) -> String {
            var out = ""
            for byte in text.utf8 {
                let plain =
                    (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                    || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_")
                out += plain ? String(UnicodeScalar(byte)) : "%" + String(byte, radix: 16, uppercase: true).leftPadded()
            }
            return out
        }
    }

    /// One row per provider: name, grant, state, subject, expiry, last error.
    static func table(_ auth: JSONValue) -> String {
        let now = Double(time(nil))
        var rows = [["PROVIDER", "GRANT", "STATE", "SUBJECT", "EXPIRES", "LAST ERROR"]]
        for (name, fields) in providers(auth) {
            let expires = fields["expiresAt"]?.doubleValue.map { TimeText.relative($0 - now) } ?? "-"
            rows.append([
                name, fields["grant"]?.stringValue ?? "?", fields["state"]?.stringValue ?? "?",
                fields["subject"]?.stringValue ?? "-", expires, fields["lastError"]?.stringValue ?? "-",
            ])
        }
        var widths = [Int](repeating: 0, count: rows[0].count)
        for row in rows { for (i, cell) in row.enumerated() { widths[i] = max(widths[i], cell.count) } }
        return rows.map { row in
            row.enumerated().map { i, cell in
                i == row.count - 1 ? cell : cell + String(repeating: " ", count: widths[i] - cell.count)
            }.joined(separator: "  ")
        }.joined(separator: "\n")
    }

    /// Whether every provider in the answer is logged in.
    static func allLoggedIn(_ auth: JSONValue) -> Bool {
        providers(auth).allSatisfy { $0.fields["loggedIn"]?.boolValue == true }
    }

    /// `login` with several providers: the browser ones through one phased login (or, with
    /// `device`, a device login each), then each journey one in the terminal, in turn.
    static func loginAll(_ target: BlockingHTTP.Target, auth: JSONValue, device: Bool, location: ConfigLocation)
        -> Int32
    {
        let waiting = providers(auth).filter { $0.fields["loggedIn"]?.boolValue != true }
        guard !waiting.isEmpty else {
            say(table(auth))
            return 0
        }
        let browser = waiting.filter { $0.fields["grant"]?.stringValue == "authorization_code" }.map(\.name)
        let journeys = waiting.filter { $0.fields["grant"]?.stringValue == "journey" }.map(\.name)
        if !browser.isEmpty {
            if device {
                for name in browser {
                    say("Signing in to \(name) (device login):")
                    let code = deviceLogin(target, provider: name)
                    if code == 2 { return 2 }
                }
            } else {
                say(
                    "Open this URL in a browser to sign in to \(browser.joined(separator: ", ")):\n  \(target.baseURL)/_platform/login"
                )
                say("Waiting for the login to complete …")
                if let outcome = waitForProviders(target, browser) { reportOutcome(outcome) }
            }
        }
        for name in journeys {
            say("Signing in to \(name) (journey):")
            _ = JourneyCommand.login(config: location, journey: nil, answersFile: nil, resume: nil, provider: name)
        }
        guard case .success(let response) = BlockingHTTP.request("GET", "/_platform/auth", to: target, timeout: 5),
            let after = try? JSONValue.parse(response.body)
        else {
            say("platform-proxy is not reachable at \(target.baseURL)")
            return 2
        }
        say(table(after))
        return allLoggedIn(after) ? 0 : 1
    }

    /// `login --provider NAME`: that provider's browser (or device) login, waiting for it alone.
    static func loginOne(_ target: BlockingHTTP.Target, _ named: NamedProvider, device: Bool) -> Int32 {
        let name = FormEncodingText.escape(named.name)
        if device { return deviceLogin(target, provider: named.name) }
        guard named.configuration.grant == .authorizationCode else {
            say("Provider \(named.name) has no browser login (grant \(named.configuration.grant.rawValue)).")
            return 1
        }
        say(
            "Open this URL in a browser to sign in to \(named.name):\n  \(target.baseURL)/_platform/login?provider=\(name)"
        )
        say("Waiting for the login to complete …")
        guard waitForProviders(target, [named.name]) != nil else { return 1 }
        say("Signed in: \(named.name).")
        return 0
    }

    /// Starts a device login of `provider` and waits until it is logged in.
    private static func deviceLogin(_ target: BlockingHTTP.Target, provider: String) -> Int32 {
        switch BlockingHTTP.request(
            "POST", "/_platform/login/device?provider=\(FormEncodingText.escape(provider))", to: target, timeout: 30)
        {
        case .success(let response) where response.status == 200:
            guard let body = try? JSONValue.parse(response.body) else { return 1 }
            say(
                "Go to \(body["verification_uri"]?.stringValue ?? "?") and enter the code \(body["user_code"]?.stringValue ?? "?")"
            )
            if let complete = body["verification_uri_complete"]?.stringValue { say("(or open \(complete))") }
        case .success(let response):
            say("The device login of \(provider) could not start (HTTP \(response.status)): \(message(response.body))")
            return 1
        case .failure(let error):
            say("platform-proxy is not reachable: \(error)")
            return 2
        }
        return waitForProviders(target, [provider]) == nil ? 1 : 0
    }

    /// Follows the auth event stream until every provider in `names` is logged in, or a phased
    /// login reports its outcome (a refusal leaves a provider logged out); nil when the stream ended.
    private static func waitForProviders(_ target: BlockingHTTP.Target, _ names: [String]) -> JSONValue? {
        var pending = Set(names)
        var buffer: [UInt8] = []
        var outcome: JSONValue?
        _ = BlockingHTTP.request("GET", "/_platform/auth/events", to: target, timeout: 600) { bytes in
            buffer.append(contentsOf: bytes)
            while let end = findBlankLine(buffer) {
                let event = String(decoding: buffer[..<end], as: UTF8.self)
                buffer.removeFirst(end + 2)
                let lines = event.split(separator: "\n")
                let kind = lines.first { $0.hasPrefix("event: ") }.map { String($0.dropFirst(7)) }
                for line in lines where line.hasPrefix("data: ") {
                    guard let data = try? JSONValue.parse(String(line.dropFirst(6))) else { continue }
                    if kind == "login" {
                        outcome = data
                        return false
                    }
                    if kind == "state", let name = data["provider"]?.stringValue, data["loggedIn"]?.boolValue == true {
                        pending.remove(name)
                    }
                }
            }
            if pending.isEmpty {
                outcome = .object(JSONObject(uniqueKeysWithValues: [("signedIn", .array(names.map { .string($0) }))]))
                return false
            }
            return true
        }
        return outcome
    }

    /// Says who the phased login signed in and who refused.
    private static func reportOutcome(_ outcome: JSONValue) {
        let signedIn = outcome["signedIn"]?.arrayValue?.compactMap(\.stringValue) ?? []
        if !signedIn.isEmpty { say("Signed in: \(signedIn.joined(separator: ", ")).") }
        for (name, reason) in outcome["notSignedIn"]?.objectValue ?? JSONObject() {
            say("Not signed in: \(name) (\(reason.stringValue ?? "?"))")
        }
    }
}

extension String {
    /// Two hex digits.
    fileprivate func leftPadded() -> String { count < 2 ? "0" + self : self }
}
