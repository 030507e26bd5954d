import CCurl
import EventLoop

/// Closes pooled upstream connections that their servers closed while idle.
///
/// libcurl (7.88) drops dead pooled connections only when a transfer connects, at most once a
/// second (`prune_dead_connections`), so after a burst an idle proxy would keep every closed
/// connection in CLOSE-WAIT, one descriptor each, until the next request. When a parked socket
/// turns readable (EOF), this starts one transfer that cannot connect — a Unix socket path that
/// never exists — a little over a second later: its connect step runs the prune, its failure is
/// ignored. Nothing leaves the machine.
final class ConnectionReaper {
    /// Where the probe is: a prune is scheduled at most once at a time, and the probe transfer
    /// runs at most once at a time (a prune asked for while it runs is scheduled all the same).
    enum State: Equatable {
        /// Nothing scheduled, no probe running.
        case idle
        /// A prune is scheduled.
        case scheduled
        /// The probe transfer is in `multi`.
        case running
        /// The probe runs and another prune is scheduled.
        case runningAndScheduled

        /// What the reaper must do after an event.
        enum Action: Equatable {
            case none
            /// Schedule `run` a little over a second from now.
            case schedule
            /// Add the probe transfer to `multi` (`startFailed` if that fails).
            case start
            /// Take the probe transfer out of `multi`.
            case remove
        }

        /// A parked connection reported EOF.
        mutating func deadConnectionSeen() -> Action {
            switch self {
            case .idle: self = .scheduled
            case .running: self = .runningAndScheduled
            case .scheduled, .runningAndScheduled: return .none
            }
            return .schedule
        }

        /// The scheduled time came: start the probe unless it still runs.
        mutating func due() -> Action {
            switch self {
            case .scheduled:
                self = .running
                return .start
            case .runningAndScheduled:
                self = .running
                return .none
            case .idle, .running:
                return .none
            }
        }

        /// curl refused the probe transfer.
        mutating func startFailed() {
            if case .running = self { self = .idle }
        }

        /// The probe transfer finished, or `multi` is going away: take it out if it runs.
        mutating func stopped() -> Action {
            switch self {
            case .running: self = .idle
            case .runningAndScheduled: self = .scheduled
            case .idle, .scheduled: return .none
            }
            return .remove
        }
    }

    private unowned let client: UpstreamClient
    private let easy: UnsafeMutableRawPointer
    private(set) var state = State.idle

    /// A path connect(2) always refuses (ENOENT): /proc/self has no such entry and nobody can make one.
    static let nowhere = "/proc/self/platform-proxy-connection-reaper"

    init(client: UpstreamClient) {
        self.client = client
        easy = curl_easy_init()
        cc_easy_str(easy, CURLOPT_URL, "http://localhost/")
        cc_easy_str(easy, CURLOPT_UNIX_SOCKET_PATH, Self.nowhere)
        cc_easy_long(easy, CURLOPT_NOSIGNAL, 1)
        cc_easy_long(easy, CURLOPT_CONNECTTIMEOUT_MS, 1000)
    }

    deinit { curl_easy_cleanup(easy) }

    /// A parked connection reported EOF: prune once the once-a-second limit allows it.
    func deadConnectionSeen() {
        guard case .schedule = state.deadConnectionSeen() else { return }
        client.loop.schedule(at: client.loop.now.adding(seconds: 1.1)) { [weak self] in self?.run() }
    }

    private func run() {
        guard case .start = state.due() else { return }
        if curl_multi_add_handle(client.multi, easy) != CURLM_OK { state.startFailed() }
        // curl asks for a 0 ms timeout through the timer callback; the loop drives it from there.
    }

    /// Takes the probe transfer out of `multi` before that is cleaned up (the client is being
    /// deinitialised, so it is not reached through the unowned reference).
    func detach(from multi: UnsafeMutableRawPointer) {
        guard case .remove = state.stopped() else { return }
        curl_multi_remove_handle(multi, easy)
    }

    /// Whether `handle` was the reaper's (then it is detached, its failure expected).
    func finished(_ handle: UnsafeMutableRawPointer) -> Bool {
        guard handle == easy else { return false }
        curl_multi_remove_handle(client.multi, easy)
        _ = state.stopped()
        return true
    }
}
