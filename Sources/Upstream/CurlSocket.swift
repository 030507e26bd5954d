import CCurl
import EventLoop
import Glibc

/// curl's sockets indexed by descriptor number (descriptors are small and reused lowest-first).
struct SocketTable {
    private var slots: [CurlSocket?] = []

    subscript(fd: CInt) -> CurlSocket? {
        get { fd >= 0 && Int(fd) < slots.count ? slots[Int(fd)] : nil }
        set {
            guard fd >= 0 else { return }
            if Int(fd) >= slots.count {
                guard newValue != nil else { return }
                slots.append(contentsOf: repeatElement(nil, count: max(Int(fd) + 1, 2 * slots.count, 64) - slots.count))
            }
            slots[Int(fd)] = newValue
        }
    }
}

/// A curl socket and its registration with the loop.
final class CurlSocket: Selectable {
    let fd: CInt
    unowned let client: UpstreamClient
    /// Opened through `UpstreamClient.openSocket`.
    let opened: Bool
    /// Opened through `openSocket` and since watched for reading, so connected: libcurl closes
    /// such a socket through `closeSocket`, and a parked registration of it is known to be current.
    var established = false { didSet { publishReadiness() } }

    /// Where it is: curl's watch and the loop's registration move together, except between
    /// transfers, when curl watches nothing and the registration stays.
    enum State: Equatable {
        /// Opened, or dropped while parked: no registration.
        case unregistered
        /// curl watches it for `interest`, and so does the loop.
        case watched(Interest)
        /// curl stopped watching it (CURL_POLL_REMOVE); still registered for `interest`.
        case parked(Interest)
    }

    var state = State.unregistered {
        didSet {
            quiet = false
            publishReadiness()
        }
    }
    /// Parked, and a loop wait begun after that has been dispatched since (`ParkedSockets`):
    /// nothing came on it as of that wait.
    private(set) var quiet = false
    /// The client's tuning, told what the loop knows of this socket (`readiness`).
    private let tuning: (any UpstreamTuning)?
    /// The easy handle that last changed curl's watch of it (`UpstreamClient.socketChanged`):
    /// compared, never followed (it may be gone).
    var user: UnsafeMutableRawPointer?
    /// Times parked, to tell the parking a `ParkedSockets` entry was made for from a later one.
    private(set) var parkings: UInt32 = 0
    /// Turned readable while parked (`ready`): never to be reused (`SocketReadiness.spoiled`).
    private(set) var spoiled = false

    init(fd: CInt, client: UpstreamClient, opened: Bool) {
        self.fd = fd
        self.client = client
        self.opened = opened
        tuning = client.tuning
    }

    /// curl stopped watching it between transfers: it stays registered for `interest`.
    func park(_ interest: Interest) {
        state = .parked(interest)
        parkings &+= 1
    }

    /// A wait begun after the parking has been seen through, and the socket is still parked.
    func becameQuiet() {
        quiet = true
        publishReadiness()
    }

    /// What the loop knows of this socket's readiness, told to the client's tuning: a connected
    /// socket parked between transfers and still registered for reading is parked until a wait
    /// saw it quiet, then quiet (it is taken out when something comes); one curl watches for
    /// reading is watched; otherwise nothing is known.
    var readiness: SocketReadiness {
        if spoiled && established { return .spoiled }
        guard established else { return .unknown }
        switch state {
        case .parked(let interest) where interest.contains(.read): return quiet ? .quiet : .parked
        case .watched(let interest) where interest.contains(.read): return .watched
        default: return .unknown
        }
    }

    private func publishReadiness() { tuning?.know(readiness, of: fd) }

    /// Activity on an idle pooled connection (the server closed it, or sent bytes no request asked
    /// for), reported by a wait or found at the parking: stop watching, make libcurl's next check
    /// of it find it dead so it is never reused, and have curl close it soon rather than hold the
    /// descriptor until the next request.
    func spoil() {
        client.loop.deregister(fd: fd)
        client.connectionSpoiled(self)
        spoiled = true
        state = .unregistered
        client.deadConnectionSeen()
    }

    func ready(_ events: UInt32) {
        if case .parked = state { return spoil() }
        var mask: Int32 = 0
        if ReadyEvents.isReadable(events) { mask |= CC_CSELECT_IN }
        if ReadyEvents.isWritable(events) { mask |= CC_CSELECT_OUT }
        if ReadyEvents.isError(events) { mask |= CC_CSELECT_ERR }
        client.socketAction(fd: fd, events: mask)
    }
}
