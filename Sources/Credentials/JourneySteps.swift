/// The opaque step ids handed to apps: each names one flow, is single-use, expires, and is
/// bound to the client that started the flow, so a leaked id is useless to anyone else.
public struct JourneySteps: Sendable {
    /// Identifies a flow in the owner's table.
    public typealias FlowID = UInt64

    private struct Entry: Sendable {
        let flow: FlowID
        let client: String
        let expires: Double
    }

    private var entries: [String: Entry] = [:]
    /// Seconds a step id stays valid.
    public let lifetime: Double
    /// Most ids held; beyond it, the client holding the most gives up its oldest.
    public let capacity: Int

    /// A table with `lifetime` seconds per id and at most `capacity` ids.
    public init(lifetime: Double, capacity: Int) {
        self.lifetime = lifetime
        self.capacity = capacity
    }

    /// Number of live ids (tests).
    public var count: Int { entries.count }

    /// A new id for `flow`, bound to `client`; returns it with the flows whose ids were dropped to make room.
    public mutating func issue(_ id: String, flow: FlowID, client: String, now: Double) -> [FlowID] {
        var dropped = expire(now: now)
        while entries.count >= capacity, let oldest = oldestOfHeaviestClient(issuing: client) {
            entries.removeValue(forKey: oldest.key)
            dropped.append(oldest.value.flow)
        }
        entries[id] = Entry(flow: flow, client: client, expires: now + lifetime)
        return dropped
    }

    /// The flow for `id` when `client` started it and it has not expired; the id is spent either way
    /// for its own client, and kept for its owner when another client guessed it.
    public mutating func take(_ id: String, client: String, now: Double) -> FlowID? {
        guard let entry = entries[id] else { return nil }
        guard entry.client == client else { return nil }
        entries.removeValue(forKey: id)
        return entry.expires > now ? entry.flow : nil
    }

    /// The oldest id of the client that holds the most, the issuing client's own when it would
    /// hold as many as any other with this one: an app that starts journeys in a loop evicts its
    /// own (found by a fault-injection review: 64 starts by one client evicted every other app's).
    private func oldestOfHeaviestClient(issuing client: String) -> (key: String, value: Entry)? {
        var counts: [String: Int] = [:]
        for entry in entries.values { counts[entry.client, default: 0] += 1 }
        guard let most = counts.values.max() else { return nil }
        let own = counts[client] ?? 0
        let heaviest = own > 0 && own + 1 >= most ? client : counts.first { $0.value == most }!.key
        return entries.filter { $0.value.client == heaviest }.min { $0.value.expires < $1.value.expires }
    }

    /// Removes expired ids; returns their flows.
    public mutating func expire(now: Double) -> [FlowID] {
        let gone = entries.filter { $0.value.expires <= now }
        for key in gone.keys { entries.removeValue(forKey: key) }
        return gone.map(\.value.flow)
    }

    /// Forgets every id (logout).
    public mutating func removeAll() { entries.removeAll() }
}
