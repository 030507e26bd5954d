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

/// A curl socket and its registration with the loop. Two enums carry its lifecycle: `state`, the
/// registration (which curl's watches move), and `link`, what is known of the connection on it
/// (which only moves forward). They change independently: a spoiled socket of a paused transfer
/// is watched again when the transfer resumes.
final class CurlSocket: Selectable {
    let fd: CInt
    unowned let client: UpstreamClient
    /// Opened through `UpstreamClient.openSocket` (a setting of the socket, not a lifecycle).
    let opened: Bool

    /// Whether a parked socket is known to have had nothing come on it.
    enum Quiet: Equatable {
        /// Not yet known: no loop wait begun after the parking has been dispatched.
        case unknown
        /// A wait begun after the parking has been dispatched (`ParkedSockets`): nothing came
        /// on it as of that wait.
        case quiet
    }

    /// Where it is: curl's watch and the loop's registration move together, except between
    /// transfers, when curl watches nothing and the registration stays.
    enum State: Equatable {
        /// Opened, or dropped while parked: no registration.
        case unregistered
        /// curl watches it for `interest`, and so does the loop.
        case watched(Interest)
        /// curl stopped watching it (CURL_POLL_REMOVE); still registered for `interest`.
        case parked(Interest, Quiet)
    }

    /// What is known of the connection on the socket.
    enum Link: Equatable {
        /// Not known to be connected: curl's own socket (not `opened`), or one of ours still connecting.
        case unproven
        /// `opened` and since watched for reading, so connected: libcurl closes such a socket
        /// through `closeSocket`, and a parked registration of it is known to be current.
        case established
        /// Turned ready while parked (`ready`) before it was established: spoiled once it is.
        case spoiledUnproven
        /// Established and turned ready while parked: never to be reused (`QuietSockets.Mark.spoiled`).
        case spoiled
    }

    /// Every change is told to the client's tuning (`readiness`).
    var state = State.unregistered { didSet { publishReadiness() } }
    private(set) var link = Link.unproven { didSet { publishReadiness() } }
    /// The client's tuning, told what the loop knows of this socket (`readiness`).
    private let tuning: (any UpstreamTuning)?
    /// The easy handle that last changed curl's watch of it (`UpstreamClient.socketChanged`):
    /// compared, never followed (it may be gone).
    var user: UnsafeMutableRawPointer?
    /// Times parked, to tell the parking a `ParkedSockets` entry was made for from a later one.
    private(set) var parkings: UInt32 = 0

    init(fd: CInt, client: UpstreamClient, opened: Bool) {
        self.fd = fd
        self.client = client
        self.opened = opened
        tuning = client.tuning
    }

    /// Whether it is known connected (`Link.established`, spoiled or not).
    var established: Bool {
        switch link {
        case .established, .spoiled: true
        case .unproven, .spoiledUnproven: false
        }
    }

    /// curl watches it for reading: one of ours has connected (a connecting socket is watched
    /// for writing only).
    func watchedForReading() {
        guard opened else { return }
        switch link {
        case .unproven: link = .established
        case .spoiledUnproven: link = .spoiled
        case .established, .spoiled: break
        }
    }

    /// curl stopped watching it between transfers: it stays registered for `interest`.
    func park(_ interest: Interest) {
        state = .parked(interest, .unknown)
        parkings &+= 1
    }

    /// A wait begun after the parking has been seen through, and the socket is still parked.
    func becameQuiet() {
        guard case .parked(let interest, .unknown) = state else { return }
        state = .parked(interest, .quiet)
    }

    /// What the loop knows of this socket's readiness, told to the client's tuning: a connected
    /// socket parked between transfers and still registered for reading is parked until a wait
    /// saw it quiet, then quiet (it is taken out when something comes); one curl watches for
    /// reading is watched; a connected one turned ready while parked is spoiled; otherwise nothing
    /// is known.
    var readiness: SocketReadiness {
        switch link {
        case .unproven, .spoiledUnproven: return .unknown
        case .spoiled: return .spoiled
        case .established: break
        }
        switch state {
        case .parked(let interest, let quiet) where interest.contains(.read): return quiet == .quiet ? .quiet : .parked
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
        switch link {
        case .unproven: link = .spoiledUnproven
        case .established: link = .spoiled
        case .spoiledUnproven, .spoiled: break
        }
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
