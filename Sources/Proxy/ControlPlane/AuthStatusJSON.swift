import JSON

/// The `/_platform/auth` answer and its event stream's `state` events, from the providers' slots.
extension ProxyHandler {
    /// One provider's fields: `{"state":…, "loggedIn":…, "expiresAt":…, "subject":…, "lastError":…}`.
    func authFields(_ slot: ProviderSlot) -> JSONObject {
        let status = slot.snapshot.status
        var object = JSONObject()
        object["state"] = .string(status.state.rawValue)
        object["loggedIn"] = .bool(status.loggedIn)
        object["expiresAt"] = status.expiresAt.map { .number(JSONNumber(($0).rounded())) } ?? .null
        object["subject"] = status.subject.map { .string($0) } ?? .null
        object["lastError"] = status.lastError.map { .string($0) } ?? .null
        return object
    }

    /// The default provider's fields, plus `"providers": {"<name>": {same fields, "grant"}}`
    /// for every configured provider.
    func authJSON() -> [UInt8] {
        var object = authFields(slot(nil))
        if !runtime.configuration.providers.isEmpty {
            var providers = JSONObject()
            for named in runtime.configuration.providers {
                var fields = authFields(slot(named.name))
                fields["grant"] = .string(named.configuration.grant.rawValue)
                providers[named.name] = .object(fields)
            }
            object["providers"] = .object(providers)
        }
        return JSONValue.object(object).serializedBytes()
    }

    /// One `state` event's data: the provider's fields and its name.
    func eventJSON(_ slot: ProviderSlot) -> [UInt8] {
        var object = authFields(slot)
        object["provider"] = .string(slot.name)
        return JSONValue.object(object).serializedBytes()
    }
}
