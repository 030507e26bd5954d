import EventLoop
import JSON

/// Why an exchange carried credentials upstream, or why not: what the console's request list
/// says beside each exchange (docs/console.md).
enum CredentialNote: UInt8, Sendable {
    /// The route injects nothing (`credential: none`) or no route matched.
    case noProvider
    /// The credential lines were injected on every hop.
    case injected
    /// Injected, then dropped: a redirect left the credential hosts.
    case stripped
    /// Never forwarded: the gate refused it or the credentials were unusable.
    case gated
    /// Answered from the route's mock folder.
    case mock

    var name: String {
        switch self {
        case .noProvider: "no_provider"
        case .injected: "injected"
        case .stripped: "not_a_credential_host"
        case .gated: "gated"
        case .mock: "mock"
        }
    }
}

/// One finished exchange as the console lists it. Never a token, a query, a cookie or a body:
/// the path is the query-less target path, the upstream its origin only.
struct RequestRecord: Sendable {
    var sequence: UInt64 = 0
    /// Unix seconds when the exchange finished.
    var time: Double = 0
    var method: String = ""
    var path: Substring = ""
    var route: String = ""
    var status: Int = 0
    var micros: Int = 0
    /// The latest hop's `scheme://host[:port]`, empty when nothing was forwarded.
    var upstream: String = ""
    var credentials: CredentialNote = .noProvider
    var hops: Int = 0
    var maskedEchoes: Int = 0

    /// The record's JSON object (`id` tells records of different loops apart).
    func json(loop: Int) -> JSONValue {
        var object = JSONObject()
        object["id"] = .string("\(loop)-\(sequence)")
        object["time"] = .number(JSONNumber(time))
        object["method"] = .string(method)
        object["path"] = .string(String(path))
        object["route"] = .string(route)
        object["status"] = .number(JSONNumber(status))
        object["durationMs"] = .number(JSONNumber(Double(micros) / 1000))
        object["upstream"] = .string(upstream)
        object["credentials"] = .string(credentials.name)
        object["redirects"] = .number(JSONNumber(hops))
        object["maskedEchoes"] = .number(JSONNumber(maskedEchoes))
        return .object(object)
    }
}

/// The last `capacity` exchanges of one loop, oldest overwritten first. Its slots are made once:
/// recording assigns into one (the strings it holds already exist elsewhere, so they are
/// retained, not copied) and allocates nothing. Read and written on its loop only.
final class RequestRing: @unchecked Sendable {
    static let capacity = 128

    private var slots = [RequestRecord](repeating: RequestRecord(), count: RequestRing.capacity)
    private var next: UInt64 = 0

    /// Overwrites the oldest slot in place: `fill` sets every field (the slot still holds the
    /// record it replaces), then the ring numbers it.
    @inline(__always)
    func record(_ fill: (inout RequestRecord) -> Void) {
        slots.withUnsafeMutableBufferPointer { slots in
            let index = Int(next % UInt64(Self.capacity))
            fill(&slots[index])
            slots[index].sequence = next
        }
        next &+= 1
    }

    /// The records held, oldest first (a copy, to hand to another loop).
    func snapshot() -> [RequestRecord] {
        let count = Int(min(next, UInt64(Self.capacity)))
        let first = next - UInt64(count)
        return (0..<count).map { slots[Int((first + UInt64($0)) % UInt64(Self.capacity))] }
    }
}
