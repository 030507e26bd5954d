import JSON

extension ConfigDecoder {
    static let journeyKeys = [
        "serverURL", "realm", "cookieName", "journey", "forceAuth", "noSession", "timeoutSeconds",
        "allowedJourneys",
    ]

    /// `provider.journey`; nil when a field is invalid (reported).
    func journey(_ object: ObjectReader) -> JourneyConfiguration? {
        let before = errors.count
        let server = object.url("serverURL", required: true)
        if let server, server.query != nil { report(object.path("serverURL"), "must not have a query") }
        let realm = object.read("realm", realm) ?? "root"
        let cookie = object.read("cookieName", cookieName) ?? "iPlanetDirectoryPro"
        let tree = object.read("journey", journeyName) ?? "Login"
        let forceAuth = object.bool("forceAuth") ?? false
        let noSession = object.bool("noSession") ?? false
        let timeout = object.seconds("timeoutSeconds", positive: true) ?? 30
        let allowed =
            object.read("allowedJourneys") { value, path in
                array(value, at: path)?.compactMap { journeyName($0.value, at: $0.path) }
            } ?? []
        guard let server, errors.count == before else { return nil }
        var journey = JourneyConfiguration(
            serverURL: server, realm: realm, cookieName: cookie, journey: tree,
            forceAuth: forceAuth, noSession: noSession, timeoutSeconds: timeout)
        journey.allowedJourneys = allowed
        return journey
    }

    /// A realm name goes into URL paths: letters, digits, `-`, `_`, `.` only.
    private func realm(_ value: JSONValue, at path: String) -> String? {
        guard let name = string(value, at: path) else { return nil }
        guard JourneyConfiguration.isPlainName(name) else {
            return failure(path, "\"\(name)\" is not a realm name (letters, digits, \"-\", \"_\", \".\")")
        }
        return name
    }

    private func cookieName(_ value: JSONValue, at path: String) -> String? {
        guard let name = string(value, at: path) else { return nil }
        guard HostSyntax.isToken(name) else { return failure(path, "\"\(name)\" is not a valid cookie name") }
        return name
    }

    private func journeyName(_ value: JSONValue, at path: String) -> String? {
        guard let name = string(value, at: path) else { return nil }
        guard JourneyConfiguration.isPlainName(name) else {
            return failure(path, "\"\(name)\" is not a journey name (letters, digits, \"-\", \"_\", \".\")")
        }
        return name
    }
}
