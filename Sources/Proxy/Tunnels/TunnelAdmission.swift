import Config
import Synchronization

/// The tunnels admitted and not yet closed, across the process: one per process, shared by every
/// loop, so `limits.maxTunnels` (in all) and `limits.maxTunnelsPerClient` (per client address)
/// hold whichever loop a client's connections land on. A tunnel is counted when it is admitted
/// (before its upstream connect) and released once when it closes, however it closes.
/// The limits and the shutdown grace are those the process started with, as for every `limits`
/// setting and `shutdownGraceSeconds` (a reload changes them at the next start).
public final class TunnelAdmission: Sendable {
    /// Most tunnels at once (`limits.maxTunnels`).
    let maxTunnels: Int
    /// Most tunnels at once from one client address (`limits.maxTunnelsPerClient`).
    let maxPerClient: Int
    /// Seconds the tunnels have to say goodbye when the process stops (`shutdownGraceSeconds`).
    let shutdownGrace: Double
    private let counts = Mutex(TunnelCounts())

    public init(limits: LimitsConfiguration = LimitsConfiguration(), shutdownGrace: Double = 9) {
        maxTunnels = limits.maxTunnels
        maxPerClient = limits.maxTunnelsPerClient
        self.shutdownGrace = shutdownGrace
    }

    /// Whether a tunnel from `address` may start under the caps; if so it is counted.
    func admit(_ address: String) -> Bool {
        counts.withLock { $0.admit(address, maxTunnels: maxTunnels, maxPerClient: maxPerClient) }
    }

    /// A tunnel from `address` that `admit` counted closed.
    func release(_ address: String) {
        counts.withLock { $0.release(address) }
    }

    /// Tunnels admitted and not yet closed, on every loop.
    public var open: Int { counts.withLock { $0.total } }
}

/// The counts behind `TunnelAdmission`, as a value: admissions under the two caps and their
/// releases.
struct TunnelCounts: Equatable {
    /// Tunnels counted in all.
    private(set) var total = 0
    /// Tunnels counted by client address; an address with none has no entry.
    private(set) var perClient: [String: Int] = [:]

    /// Counts a tunnel from `address` if both caps leave room for it.
    mutating func admit(_ address: String, maxTunnels: Int, maxPerClient: Int) -> Bool {
        let mine = perClient[address, default: 0]
        guard total < maxTunnels, mine < maxPerClient else { return false }
        total += 1
        perClient[address] = mine + 1
        return true
    }

    /// Uncounts a tunnel from `address` (one that `admit` counted).
    mutating func release(_ address: String) {
        guard let mine = perClient[address] else { return }
        total -= 1
        perClient[address] = mine > 1 ? mine - 1 : nil
    }
}
