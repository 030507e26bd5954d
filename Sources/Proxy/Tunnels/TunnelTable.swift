import EventLoop
import HTTPServer
import Synchronization
import Upstream

/// A loop's tunnels: admission under the caps (`limits.maxTunnels` across the process,
/// `limits.maxTunnelsPerClient` per client address on this loop), the close line of the access
/// log and the tunnel metrics, and withdrawal (logout, reload, shutdown).
final class TunnelTable {
    /// The loop's handler (it lives as long as the process).
    weak var handler: ProxyHandler?
    /// Opens the upstream connections (libcurl connect-only handles).
    let connector: TunnelConnector
    /// Where reads land before they are queued: one buffer per loop.
    var scratch = [UInt8](repeating: 0, count: 65536)
    private var tunnels: [ObjectIdentifier: Tunnel] = [:]
    private var perClient: [String: Int] = [:]
    /// Tunnels admitted and not yet closed, across every loop.
    private static let admitted = Atomic<Int>(0)
    /// By provider, the newest token generation an upstream refused (a 401 that asks for a
    /// refresh), on any loop: when the replacement arrives (`credentialsChanged`, on every loop)
    /// the tunnels carrying that token or an older one close.
    private static let refusedTokens = Mutex<[String: UInt64]>([:])

    /// An upstream refused `provider`'s token of `generation`.
    static func tokenRefused(provider: String, generation: UInt64) {
        refusedTokens.withLock { $0[provider] = max($0[provider] ?? 0, generation) }
    }

    /// The newest refused generation of `provider`'s tokens, if any was refused.
    static func refusedGeneration(provider: String) -> UInt64? {
        refusedTokens.withLock { $0[provider] }
    }
    /// Most bytes queued toward one side of a tunnel: past it the other side is not read.
    static let queueCap = 256 * 1024

    init(client: UpstreamClient) {
        connector = TunnelConnector(client: client)
    }

    /// Tunnels on this loop (any state).
    var count: Int { tunnels.count }

    /// Whether a tunnel from `peer` may start under the caps; if so it is counted.
    func admit(peer: String, maxTunnels: Int, maxPerClient: Int) -> Bool {
        let address = Self.address(peer)
        guard perClient[address, default: 0] < maxPerClient else { return false }
        let total = Self.admitted.add(1, ordering: .relaxed).newValue
        guard total <= maxTunnels else {
            Self.admitted.subtract(1, ordering: .relaxed)
            return false
        }
        perClient[address, default: 0] += 1
        return true
    }

    /// Keeps `tunnel` (admitted) until it closes.
    func add(_ tunnel: Tunnel) { tunnels[ObjectIdentifier(tunnel)] = tunnel }

    /// The tunnel's upstream answered 101 and the client has the socket.
    func opened(_ tunnel: Tunnel) {
        handler?.metrics.tunnelOpened(route: tunnel.identity.route)
    }

    /// The tunnel ended: its access-log close line, its metrics, its place under the caps.
    func closed(_ tunnel: Tunnel, reason: String, bridged: Bool, seconds: Double) {
        guard tunnels.removeValue(forKey: ObjectIdentifier(tunnel)) != nil else { return }
        Self.admitted.subtract(1, ordering: .relaxed)
        let address = Self.address(tunnel.identity.peer)
        if let n = perClient[address] { perClient[address] = n > 1 ? n - 1 : nil }
        handler?.metrics.tunnelClosed(route: tunnel.identity.route, reason: reason, wasOpen: bridged)
        guard bridged, let handler else { return }
        // The access log's closing line of the tunnel (its opening line is the 101 exchange's):
        // written when the access log is on, and always for a failure.
        let failed = reason.hasSuffix("_error") || reason == "drain_timeout"
        guard failed || handler.runtime.configuration.accessLog else { return }
        handler.log.emit(
            failed ? .warning : .info, "tunnel_closed",
            [
                ("requestID", .string(tunnel.identity.requestID)), ("route", .string(tunnel.identity.route)),
                ("upgrade", .string(tunnel.identity.upgrade)), ("reason", .string(reason)),
                ("durationMs", .int(Int(seconds * 1000))), ("bytesUp", .int(tunnel.bytesUp)),
                ("bytesDown", .int(tunnel.bytesDown)),
            ])
    }

    /// Withdraws the tunnels `matching` says so of (`reason` is logged and counted).
    func withdraw(reason: String, matching: (Tunnel.Identity) -> Bool) {
        for tunnel in Array(tunnels.values) where matching(tunnel.identity) { tunnel.withdraw(reason) }
    }

    /// The address part of a `host:port` peer (an IPv6 one is bracketed).
    private static func address(_ peer: String) -> String {
        guard let colon = peer.lastIndex(of: ":") else { return peer }
        return String(peer[..<colon])
    }
}
