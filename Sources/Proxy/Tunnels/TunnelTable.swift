import EventLoop
import HTTPServer
import Synchronization
import Upstream

/// A loop's tunnels: admission under the process's caps (`TunnelAdmission`), the close line of
/// the access log and the tunnel metrics, and withdrawal (logout, reload, shutdown).
final class TunnelTable {
    /// The loop's handler (it lives as long as the process).
    weak var handler: ProxyHandler?
    /// Opens the upstream connections (libcurl connect-only handles).
    let connector: TunnelConnector
    /// Where reads land before they are queued: one buffer per loop.
    var scratch = [UInt8](repeating: 0, count: 65536)
    /// The process's tunnel counts and caps, shared with every loop.
    let admission: TunnelAdmission
    /// The admitted tunnels not yet closed; a tunnel leaves (and is released from `admission`)
    /// only here, once.
    private var tunnels: [ObjectIdentifier: Tunnel] = [:]
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

    init(client: UpstreamClient, admission: TunnelAdmission) {
        connector = TunnelConnector(client: client)
        self.admission = admission
    }

    /// Tunnels on this loop (any state).
    var count: Int { tunnels.count }

    /// Whether a tunnel from `peer` may start under the process's caps; if so it is counted,
    /// and must be kept with `add` at once (its close releases it).
    func admit(peer: String) -> Bool { admission.admit(Self.address(peer)) }

    /// Keeps `tunnel` (admitted) until it closes.
    func add(_ tunnel: Tunnel) { tunnels[ObjectIdentifier(tunnel)] = tunnel }

    /// The tunnel's upstream answered 101 and the client has the socket.
    func opened(_ tunnel: Tunnel) {
        handler?.metrics.tunnelOpened(route: tunnel.identity.route)
    }

    /// The tunnel ended: its access-log close line, its metrics, its place under the caps.
    func closed(_ tunnel: Tunnel, reason: String, opened: Bool, seconds: Double) {
        guard tunnels.removeValue(forKey: ObjectIdentifier(tunnel)) != nil else { return }
        admission.release(Self.address(tunnel.identity.peer))
        handler?.metrics.tunnelClosed(route: tunnel.identity.route, reason: reason, wasOpen: opened)
        guard opened, let handler else { return }
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

    /// Withdraws the tunnels `matching` says so of (`reason` is logged and counted); each has
    /// `seconds` to say goodbye to its client.
    func withdraw(reason: String, within seconds: Double = Tunnel.drainSeconds, matching: (Tunnel.Identity) -> Bool) {
        for tunnel in Array(tunnels.values) where matching(tunnel.identity) {
            tunnel.withdraw(reason, within: seconds)
        }
    }

    /// The address part of a `host:port` peer (an IPv6 one is bracketed).
    static func address(_ peer: String) -> String {
        guard let colon = peer.lastIndex(of: ":") else { return peer }
        return String(peer[..<colon])
    }
}
