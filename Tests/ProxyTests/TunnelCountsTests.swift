import Config
import Testing

@testable import Proxy

/// One step on the process's tunnel counts: admit (expecting the answer) or release an address.
private enum Step {
    case admit(String, Bool)
    case release(String)
}

/// (caps: maxTunnels, maxPerClient; steps; total after; per client after).
private let rows: [(Int, Int, [Step], Int, [String: Int])] = [
    // Per client: the cap holds for one address, another still gets in.
    (10, 2, [.admit("a", true), .admit("a", true), .admit("a", false), .admit("b", true)], 3, ["a": 2, "b": 1]),
    // In all: the process cap holds whoever asks.
    (2, 5, [.admit("a", true), .admit("b", true), .admit("c", false)], 2, ["a": 1, "b": 1]),
    // A release gives the place back, to the same client or to another.
    (10, 1, [.admit("a", true), .admit("a", false), .release("a"), .admit("a", true)], 1, ["a": 1]),
    (1, 5, [.admit("a", true), .admit("b", false), .release("a"), .admit("b", true)], 1, ["b": 1]),
    // A refused admission counts nothing: one release empties the counts.
    (10, 1, [.admit("a", true), .admit("a", false), .admit("a", false), .release("a")], 0, [:]),
    // An address whose tunnels all closed leaves no entry; a stray release changes nothing.
    (10, 3, [.admit("a", true), .admit("b", true), .release("a"), .release("a"), .release("c")], 1, ["b": 1]),
    // Caps of 0 refuse every tunnel.
    (0, 5, [.admit("a", false)], 0, [:]),
    (5, 0, [.admit("a", false)], 0, [:]),
]

@Test(arguments: rows.indices)
func tunnelCountsRow(_ index: Int) {
    let (maxTunnels, maxPerClient, steps, total, perClient) = rows[index]
    var counts = TunnelCounts()
    for (n, step) in steps.enumerated() {
        switch step {
        case .admit(let address, let expected):
            #expect(
                counts.admit(address, maxTunnels: maxTunnels, maxPerClient: maxPerClient) == expected,
                "row \(index), step \(n)")
        case .release(let address):
            counts.release(address)
        }
    }
    #expect(counts.total == total, "row \(index)")
    #expect(counts.perClient == perClient, "row \(index)")
}

/// The shared admission takes its caps from the limits it was made with.
@Test func tunnelAdmissionUsesItsLimits() {
    var limits = LimitsConfiguration()
    limits.maxTunnels = 3
    limits.maxTunnelsPerClient = 2
    let admission = TunnelAdmission(limits: limits, shutdownGrace: 4)
    #expect(admission.admit("a") && admission.admit("a"))
    #expect(!admission.admit("a"))
    #expect(admission.admit("b"))
    #expect(!admission.admit("c"))
    #expect(admission.open == 3)
    admission.release("a")
    #expect(admission.admit("c"))
    #expect(admission.shutdownGrace == 4)
}
