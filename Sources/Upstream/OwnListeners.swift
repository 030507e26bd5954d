import Glibc
import Synchronization

/// The proxy's own TCP listeners, so that a hop about to connect back to one of them is refused
/// (`UpstreamRequest.refusesOwnListeners`): a redirect from a foreign host to the proxy's own
/// address would come back in as a new request and be credentialed by its route, with the
/// foreign host choosing path, method and body, and a redirect that keeps pointing at the proxy
/// would open a connection per pass until `maxConnections`. Checked against the address libcurl
/// is about to send to (`CURLOPT_PREREQFUNCTION`), so names, `127.1`, IPv4-mapped IPv6 and the
/// like are all seen as the address they resolved to.
///
/// Set once the listeners are bound (port 0 becomes a port then). Each loop asks for its own
/// `Snapshot` once they are set and checks its hops against that: a lock taken, or this object
/// retained, per hop would be a write both loops make to one cache line on every request
/// (docs/performance.md, "Nothing shared is written").
public final class OwnListeners: Sendable {
    /// One listener: its address (16 bytes, IPv4 as IPv4-mapped IPv6; nil for a wildcard) and port.
    struct Endpoint: Equatable {
        let address: [UInt8]?
        let port: Int
    }

    /// Nil until `set`.
    private let endpoints = Mutex<[Endpoint]?>(nil)

    public init() {}

    /// Records the bound TCP listeners: `host` is an IP literal, "localhost" (both loopback
    /// addresses) or a wildcard ("0.0.0.0", "::").
    public func set(_ listeners: [(host: String, port: UInt16)]) {
        var list: [Endpoint] = []
        for (host, port) in listeners {
            if host == "localhost" {
                list.append(Endpoint(address: Self.address("127.0.0.1"), port: Int(port)))
                list.append(Endpoint(address: Self.address("::1"), port: Int(port)))
            } else if let address = Self.address(host) {
                list.append(
                    Endpoint(address: address == Self.anyV4 || address == Self.anyV6 ? nil : address, port: Int(port)))
            }
        }
        endpoints.withLock { $0 = list }
    }

    /// The listeners as last set, in storage of the caller's own (nothing in it is shared with
    /// another loop's copy); nil before `set`.
    public func snapshot() -> Snapshot? {
        endpoints.withLock { list in
            list.map {
                Snapshot(endpoints: $0.map { Endpoint(address: $0.address.map { $0.map { $0 } }, port: $0.port) })
            }
        }
    }

    /// `Snapshot.contains` on the listeners as last set (false before `set`).
    public func contains(primary: UnsafePointer<CChar>, port: Int, local: UnsafePointer<CChar>) -> Bool {
        snapshot()?.contains(primary: primary, port: port, local: local) ?? false
    }

    /// One loop's copy of the listeners.
    public struct Snapshot: Sendable {
        let endpoints: [Endpoint]

        /// Whether a connection to `primary`:`port`, made from `local`, reaches one of the
        /// listeners. A wildcard listener is reached through a loopback address, or through an
        /// address of this host (one the connection's own end has too). Asked before every hop:
        /// the port is compared first, and only a hop to a listener's port has its addresses parsed.
        public func contains(primary: UnsafePointer<CChar>, port: Int, local: UnsafePointer<CChar>) -> Bool {
            guard endpoints.contains(where: { $0.port == port }), let target = OwnListeners.address(primary) else {
                return false
            }
            return endpoints.contains { endpoint in
                guard endpoint.port == port else { return false }
                guard let address = endpoint.address else {
                    return OwnListeners.isLoopback(target) || OwnListeners.address(local) == target
                }
                return address == target
            }
        }
    }

    /// An IP literal as 16 bytes (IPv4 as IPv4-mapped IPv6), or nil.
    static func address(_ text: UnsafePointer<CChar>) -> [UInt8]? {
        var bytes = [UInt8](repeating: 0, count: 16)
        let parsed = bytes.withUnsafeMutableBytes { buffer -> Bool in
            if inet_pton(AF_INET6, text, buffer.baseAddress) == 1 { return true }
            // 10 zero bytes, two 0xFF, then the four IPv4 bytes.
            guard inet_pton(AF_INET, text, buffer.baseAddress! + 12) == 1 else { return false }
            buffer[10] = 0xFF
            buffer[11] = 0xFF
            return true
        }
        return parsed ? bytes : nil
    }

    private static let anyV4 = address("0.0.0.0")
    private static let anyV6 = address("::")

    /// 127.0.0.0/8 (IPv4-mapped) or ::1.
    static func isLoopback(_ address: [UInt8]) -> Bool {
        let mapped = address[0..<10].allSatisfy { $0 == 0 } && address[10] == 0xFF && address[11] == 0xFF
        if mapped { return address[12] == 127 }
        return address[0..<15].allSatisfy { $0 == 0 } && address[15] == 1
    }
}
