import Testing

@testable import Upstream

@Suite("OwnListeners")
struct OwnListenersTests {
    /// (listeners, the address libcurl is about to send to, the connection's own end, expected).
    static let table: [(listen: [(String, UInt16)], primary: String, port: Int, local: String, own: Bool)] = [
        ([("127.0.0.1", 8080)], "127.0.0.1", 8080, "127.0.0.1", true),
        ([("127.0.0.1", 8080)], "127.0.0.1", 8081, "127.0.0.1", false),
        ([("127.0.0.1", 8080)], "127.0.0.2", 8080, "127.0.0.1", false),
        // IPv4-mapped IPv6 is the same address.
        ([("127.0.0.1", 8080)], "::ffff:127.0.0.1", 8080, "::ffff:127.0.0.1", true),
        // "localhost" listens on both loopback addresses.
        ([("localhost", 8080)], "::1", 8080, "::1", true),
        ([("localhost", 8080)], "127.0.0.1", 8080, "127.0.0.1", true),
        ([("::1", 8080)], "127.0.0.1", 8080, "127.0.0.1", false),
        // A wildcard listener is reached through any loopback address, or an address of this host
        // (the connection's own end has it too), never through another host with the same port.
        ([("0.0.0.0", 8080)], "127.0.0.5", 8080, "127.0.0.1", true),
        ([("0.0.0.0", 8080)], "10.1.2.3", 8080, "10.1.2.3", true),
        ([("0.0.0.0", 8080)], "10.1.2.4", 8080, "10.1.2.3", false),
        ([("::", 8080)], "::1", 8080, "::1", true),
        ([("::", 8080)], "2001:db8::1", 8080, "2001:db8::2", false),
        // Nothing set: nothing is the proxy's own.
        ([], "127.0.0.1", 8080, "127.0.0.1", false),
        // Not an address: no match rather than a guess.
        ([("127.0.0.1", 8080)], "", 8080, "127.0.0.1", false),
    ]

    @Test("a hop is the proxy's own when its address and port are a listener's", arguments: 0..<table.count)
    func matches(row: Int) {
        let entry = Self.table[row]
        let listeners = OwnListeners()
        listeners.set(entry.listen.map { (host: $0.0, port: $0.1) })
        #expect(
            listeners.contains(primary: entry.primary, port: entry.port, local: entry.local) == entry.own,
            "row \(row): \(entry)")
    }

    @Test("a snapshot is nil before the listeners are set and keeps what was set when it was taken")
    func snapshots() throws {
        let listeners = OwnListeners()
        #expect(listeners.snapshot() == nil)
        listeners.set([(host: "127.0.0.1", port: 8080)])
        let copy = try #require(listeners.snapshot())
        listeners.set([(host: "127.0.0.1", port: 9090)])
        #expect(copy.contains(primary: "127.0.0.1", port: 8080, local: "127.0.0.1"))
        #expect(!copy.contains(primary: "127.0.0.1", port: 9090, local: "127.0.0.1"))
    }

    @Test("setting again replaces the listeners")
    func replaces() {
        let listeners = OwnListeners()
        listeners.set([(host: "127.0.0.1", port: 8080)])
        listeners.set([(host: "127.0.0.1", port: 9090)])
        #expect(!listeners.contains(primary: "127.0.0.1", port: 8080, local: "127.0.0.1"))
        #expect(listeners.contains(primary: "127.0.0.1", port: 9090, local: "127.0.0.1"))
    }
}
