import CCurl
import EventLoop
import Glibc

/// A multi handle holding at most `TunnelConnector.shardSize` tunnels' handles. libcurl 7.88
/// finds a connect-only handle's connection, for each `curl_easy_send` and `curl_easy_recv`, by
/// walking its multi handle's whole connection cache: one multi handle for all of a loop's
/// tunnels would make every message cost a step per open tunnel. Its connects are driven as the
/// client's transfers are (curl's `ephiperfifo.c`): the socket callback sets the loop's interest
/// in a connecting socket, the timer callback arms a loop timer, and `curl_multi_socket_action`
/// runs from the loop's events. A finished connect's socket is the tunnel's (libcurl stops
/// watching it: `CURL_POLL_REMOVE`).
final class TunnelShard {
    let multi: UnsafeMutableRawPointer
    /// Handles added and not yet removed.
    var count = 0
    private let loop: EventLoop
    /// Told of the connects that ended.
    private weak var connector: TunnelConnector?
    /// The sockets libcurl watches for a connect under way, each with its loop registration's target.
    private var watched: [CInt: ConnectingSocket] = [:]
    /// The loop timer libcurl asked for.
    private var timer: TimerID?

    init(loop: EventLoop, connector: TunnelConnector) {
        self.loop = loop
        self.connector = connector
        multi = curl_multi_init()
        // Unretained: the callbacks are taken off before the shard goes (`deinit`).
        let me = Unmanaged.passUnretained(self).toOpaque()
        cc_multi_socket_function(
            multi,
            { _, fd, what, userp, _ in
                Unmanaged<TunnelShard>.fromOpaque(userp!)._withUnsafeGuaranteedRef { $0.socketChanged(fd, what) }
                return 0
            })
        cc_multi_ptr(multi, CURLMOPT_SOCKETDATA, me)
        cc_multi_timer_function(
            multi,
            { _, timeout, userp in
                Unmanaged<TunnelShard>.fromOpaque(userp!)._withUnsafeGuaranteedRef { $0.timerChanged(timeout) }
                return 0
            })
        cc_multi_ptr(multi, CURLMOPT_TIMERDATA, me)
    }

    deinit {
        if let timer { loop.cancel(timer) }
        // No socket is watched by now: libcurl says `CURL_POLL_REMOVE` before it closes one.
        cc_multi_socket_function(multi, nil)
        cc_multi_timer_function(multi, nil)
        curl_multi_cleanup(multi)
    }

    /// libcurl's interest in a connecting socket changed.
    private func socketChanged(_ fd: CInt, _ what: Int32) {
        if what == CC_POLL_REMOVE {
            if watched.removeValue(forKey: fd) != nil { loop.deregister(fd: fd) }
            return
        }
        var interest: Interest = []
        if what == CC_POLL_IN || what == CC_POLL_INOUT { interest.insert(.read) }
        if what == CC_POLL_OUT || what == CC_POLL_INOUT { interest.insert(.write) }
        let socket = watched[fd] ?? ConnectingSocket(shard: self, fd: fd)
        watched[fd] = socket
        // A claim: the number may still name an earlier registration (a socket curl closed).
        do { try loop.claim(fd: fd, interest: interest, target: socket) } catch { watched[fd] = nil }
    }

    /// libcurl wants to be called in `milliseconds` (-1: not at all).
    private func timerChanged(_ milliseconds: Int) {
        if let timer { loop.cancel(timer) }
        timer = nil
        guard milliseconds >= 0 else { return }
        timer = loop.schedule(at: loop.now.adding(seconds: Double(milliseconds) / 1000)) { [weak self] in
            guard let self else { return }
            self.timer = nil
            self.act(fd: CC_SOCKET_TIMEOUT, events: 0)
        }
    }

    /// Runs libcurl on `fd`'s readiness (or its timeout), then reports the connects that ended.
    func act(fd: CInt, events: Int32) {
        var running: Int32 = 0
        curl_multi_socket_action(multi, fd, events, &running)
        connector?.collect(self)
    }
}

/// A connecting socket's registration with the loop.
private final class ConnectingSocket: Selectable {
    private weak var shard: TunnelShard?
    private let fd: CInt

    init(shard: TunnelShard, fd: CInt) {
        self.shard = shard
        self.fd = fd
    }

    func ready(_ events: UInt32) {
        var mask: Int32 = 0
        if ReadyEvents.isReadable(events) { mask |= CC_CSELECT_IN }
        if ReadyEvents.isWritable(events) { mask |= CC_CSELECT_OUT }
        if ReadyEvents.isError(events) { mask |= CC_CSELECT_ERR }
        shard?.act(fd: fd, events: mask)
    }
}

/// Opens a loop's tunnels' upstream connections: small multi handles of its own (`TunnelShard`)
/// that hold each connect-only handle for the tunnel's life (libcurl requires it), each driven by
/// the loop's readiness and timers while connects are under way.
public final class TunnelConnector {
    private let client: UpstreamClient
    /// Shards with handles; an emptied one goes.
    private var shards: [TunnelShard] = []
    /// Handles whose connect is under way.
    private var connecting: [UpstreamTunnel] = []
    static let shardSize = 16

    /// The connector of `client`'s loop.
    public init(client: UpstreamClient) {
        self.client = client
    }

    /// Starts connecting to `origin` (`http://host:port` or `https://…`) with the route's or
    /// provider's `tls` settings (nil: the defaults); `connected` is called on the loop with nil
    /// once the tunnel's bytes may move, or with why it failed (`.loop` for the proxy's own listener).
    public func connect(
        origin: String, connectTimeout: Double, tls: UpstreamTLS?,
        connected: @escaping (UpstreamError?) -> Void
    ) -> UpstreamTunnel {
        let tunnel = UpstreamTunnel(
            origin: origin, connectTimeout: connectTimeout, tls: tls, client: client, connector: self)
        tunnel.onConnected = connected
        let shard: TunnelShard
        if let last = shards.last, last.count < Self.shardSize {
            shard = last
        } else if let roomy = shards.first(where: { $0.count < Self.shardSize }) {
            shard = roomy
        } else {
            shard = TunnelShard(loop: client.loop, connector: self)
            shards.append(shard)
        }
        // Listed first: adding the handle may arm the shard's timer, whose run reports it.
        connecting.append(tunnel)
        let result = curl_multi_add_handle(shard.multi, tunnel.easy)
        if result != CURLM_OK {
            connecting.removeAll { $0 === tunnel }
            client.loop.afterEvents { [weak tunnel] in
                tunnel?.connectFailed(.unreachable("curl_multi_add_handle: \(result.rawValue)"))
            }
            return tunnel
        }
        shard.count += 1
        tunnel.shard = shard
        return tunnel
    }

    /// Takes a closing tunnel's handle out of its multi handle.
    func remove(_ tunnel: UpstreamTunnel) {
        connecting.removeAll { $0 === tunnel }
        guard let shard = tunnel.shard else { return }
        tunnel.shard = nil
        curl_multi_remove_handle(shard.multi, tunnel.easy)
        shard.count -= 1
        if shard.count == 0 { shards.removeAll { $0 === shard } }
    }

    /// Reports the connects of `shard` that ended.
    func collect(_ shard: TunnelShard) {
        var left: Int32 = 0
        while let message = curl_multi_info_read(shard.multi, &left) {
            guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle else { continue }
            guard let index = connecting.firstIndex(where: { $0.easy == easy }) else { continue }
            let tunnel = connecting.remove(at: index)
            tunnel.connectEnded(cc_msg_result(message))
        }
    }
}
