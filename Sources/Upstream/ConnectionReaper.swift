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
    private unowned let client: UpstreamClient
    private let easy: UnsafeMutableRawPointer
    private var scheduled = false
    private var running = false

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
        guard !scheduled else { return }
        scheduled = true
        client.loop.schedule(at: client.loop.now.adding(seconds: 1.1)) { [weak self] in self?.run() }
    }

    private func run() {
        scheduled = false
        guard !running else { return }
        running = true
        if curl_multi_add_handle(client.multi, easy) != CURLM_OK { running = false }
        // curl asks for a 0 ms timeout through the timer callback; the loop drives it from there.
    }

    /// Takes the probe transfer out of `multi` before that is cleaned up (the client is being
    /// deinitialised, so it is not reached through the unowned reference).
    func detach(from multi: UnsafeMutableRawPointer) {
        guard running else { return }
        curl_multi_remove_handle(multi, easy)
        running = false
    }

    /// Whether `handle` was the reaper's (then it is detached, its failure expected).
    func finished(_ handle: UnsafeMutableRawPointer) -> Bool {
        guard handle == easy else { return false }
        curl_multi_remove_handle(client.multi, easy)
        running = false
        return true
    }
}
