import JSON

/// The AM session (`tokenId`) behind the stored tokens, kept so a logout after a restart can
/// still end it: `<stateDirectory>/journey-session.json`, mode 0600, written like the tokens.
/// Blocking: use it on the worker.
public struct JourneySessionStore: Sendable {
    private let file: DurableFile

    /// The store in `directory`.
    public init(directory: String, name: String = "journey-session.json") {
        file = DurableFile(directory: directory, name: name)
    }

    /// The stored session, if a readable one exists.
    public func load() -> String? {
        guard case .bytes(let bytes) = file.read(), let json = try? JSONValue.parse(bytes) else { return nil }
        return json["tokenId"]?.stringValue
    }

    /// Stores `session`.
    public func save(_ session: String) throws(TokenStoreError) {
        try file.write(
            JSONValue.object(JSONObject(uniqueKeysWithValues: [("tokenId", .string(session))])).serializedBytes())
    }

    /// Forgets the session; a missing file is fine.
    public func delete() throws(TokenStoreError) { try file.delete() }
}
