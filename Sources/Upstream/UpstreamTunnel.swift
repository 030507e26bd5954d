import CCurl
import EventLoop
import Glibc

/// One upstream connection for a tunnel (a WebSocket or another upgraded protocol), opened by
/// libcurl with `CURLOPT_CONNECT_ONLY`: the TLS verification, the CA bundle, the proxy settings
/// and the socket callbacks are those of every transfer; after the connect, the bytes are the
/// caller's, moved with `curl_easy_send`/`curl_easy_recv` (libcurl encrypts them on an `https:`
/// upstream, so a `wss` tunnel is the same code). The caller watches `fd` on its loop.
public final class UpstreamTunnel {
    /// What one `send` or `receive` did.
    public enum Step: Equatable {
        /// `n` bytes moved (a `receive` of 0 is the upstream's end of stream).
        case moved(Int)
        /// Nothing can move now: wait for the socket.
        case again
        /// The connection failed (libcurl's message).
        case failed(String)
    }

    let easy: UnsafeMutableRawPointer
    private let errorBuffer: UnsafeMutablePointer<CChar>
    /// Connecting, connected (on which socket), failed or closed: every decision is its.
    private var lifecycle = UpstreamTunnelLifecycle()
    /// The connected socket, -1 before the connect finished and after a failure or the close.
    public var fd: CInt { lifecycle.fd }
    /// Told once when the connect finished: nil on success, else why it failed.
    var onConnected: ((UpstreamError?) -> Void)?
    /// The client whose listeners a tunnel never connects to (a route pointing at the proxy
    /// would tunnel into itself, each hop opening another).
    private unowned let client: UpstreamClient
    /// The connector whose multi handle holds this handle until `close` (libcurl's send and receive
    /// work only while it is added).
    private weak var connector: TunnelConnector?
    /// The connector's multi handle holding this handle (`TunnelConnector.remove`).
    var shard: TunnelShard?
    /// The `CURLOPT_CONNECT_TO` entry of a route's TLS server name, kept for the handle's life.
    private var connectTo: UnsafeMutablePointer<curl_slist>?

    init(origin: String, connectTimeout: Double, tls: UpstreamTLS?, client: UpstreamClient, connector: TunnelConnector)
    {
        easy = curl_easy_init()
        self.connector = connector
        self.client = client
        errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE))
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE))
        cc_easy_long(easy, CURLOPT_NOSIGNAL, 1)
        cc_easy_str(easy, CURLOPT_PROTOCOLS_STR, "http,https")
        cc_easy_long(easy, CURLOPT_SSL_VERIFYPEER, 1)
        cc_easy_long(easy, CURLOPT_SSL_VERIFYHOST, 2)
        // The route's or provider's TLS settings, as its transfers have them (`EasyHandle.setTLS`).
        if let caFile = tls?.caFile ?? EasyHandle.caBundle { cc_easy_str(easy, CURLOPT_CAINFO, caFile) }
        if let certificate = tls?.clientCertificate { cc_easy_str(easy, CURLOPT_SSLCERT, certificate) }
        if let key = tls?.clientKey { _ = key.withUnsafeBytes { cc_easy_sslkey_blob(easy, $0.baseAddress, $0.count) } }
        var url = origin
        if let named = tls?.named(RequestURL(origin: origin, path: "/", query: nil)) {
            url = named.target.origin
            connectTo = curl_slist_append(nil, named.connectTo)
            cc_easy_slist(easy, CURLOPT_CONNECT_TO, connectTo)
        }
        // An upgrade is an HTTP/1.1 exchange: ALPN offers only http/1.1.
        cc_easy_long(easy, CURLOPT_HTTP_VERSION, CC_HTTP_VERSION_1_1)
        cc_easy_long(easy, CURLOPT_CONNECT_ONLY, 1)
        // libcurl's own receive buffer is unused by `curl_easy_recv`: the smallest keeps an idle
        // tunnel small.
        cc_easy_long(easy, CURLOPT_BUFFERSIZE, 1024)
        cc_easy_long(easy, CURLOPT_CONNECTTIMEOUT_MS, Int(max(0.001, min(connectTimeout, 10)) * 1000))
        cc_easy_ptr(easy, CURLOPT_ERRORBUFFER, errorBuffer)
        if let tlsSessions = client.tlsSessions { cc_easy_ptr(easy, CURLOPT_SHARE, tlsSessions) }
        if !EasyHandle.environmentNamesProxy {
            cc_easy_str(easy, CURLOPT_PROXY, "")
            cc_easy_str(easy, CURLOPT_NOPROXY, "")
        }
        // The client's socket callbacks, as for every transfer: the number of a socket it opened
        // names a new socket there, and its closing is seen.
        client.ownSockets(of: easy)
        url.withCString { _ = cc_easy_str(easy, CURLOPT_URL, $0) }
    }

    deinit {
        close()
        errorBuffer.deallocate()
    }

    /// The connect ended (`TunnelConnector`).
    func connectEnded(_ code: CURLcode) {
        guard code == CURLE_OK else { return perform(lifecycle.connectFailed(.unreachable(message(code)))) }
        let socket = cc_info_active_socket(easy)
        guard socket != CC_SOCKET_BAD else {
            return perform(lifecycle.connectFailed(.unreachable("no connected socket")))
        }
        if connectsToOwnListener {
            return perform(lifecycle.connectFailed(.loop("the tunnel would connect to this proxy's own listener")))
        }
        perform(lifecycle.connected(fd: socket))
    }

    /// The connect could not start (`TunnelConnector`).
    func connectFailed(_ error: UpstreamError) { perform(lifecycle.connectFailed(error)) }

    private func perform(_ action: UpstreamTunnelLifecycle.Action) {
        switch action {
        case .none:
            break
        case .report(let error):
            let callback = onConnected
            onConnected = nil
            callback?(error)
        case .release:
            onConnected = nil
            connector?.remove(self)
            curl_easy_cleanup(easy)
            curl_slist_free_all(connectTo)
            connectTo = nil
        }
    }

    /// Whether the connection reached one of the proxy's own listeners (as a transfer's
    /// `refusesOwnListeners` checks before sending).
    private var connectsToOwnListener: Bool {
        var primary: UnsafeMutableRawPointer?
        var local: UnsafeMutableRawPointer?
        var port = 0
        guard cc_info_ptr(easy, CURLINFO_PRIMARY_IP, &primary) == CURLE_OK, let primary,
            cc_info_ptr(easy, CURLINFO_LOCAL_IP, &local) == CURLE_OK, let local,
            cc_info_long(easy, CURLINFO_PRIMARY_PORT, &port) == CURLE_OK
        else { return false }
        return client.reachesOwnListener(
            primary: primary.assumingMemoryBound(to: CChar.self), port: port,
            local: local.assumingMemoryBound(to: CChar.self))
    }

    private func message(_ code: CURLcode) -> String {
        let detail = String(cString: errorBuffer)
        return detail.isEmpty ? String(cString: curl_easy_strerror(code)) : detail
    }

    /// Sends what the socket takes of `bytes` now.
    public func send(_ bytes: UnsafeRawBufferPointer) -> Step {
        guard case .connected = lifecycle.state else { return .failed("closed") }
        var n = 0
        let code = curl_easy_send(easy, bytes.baseAddress, bytes.count, &n)
        if code == CURLE_OK { return .moved(n) }
        if code == CURLE_AGAIN { return .again }
        return .failed(message(code))
    }

    /// Receives what has arrived, up to `buffer.count` bytes; `.moved(0)` is the end of stream.
    public func receive(into buffer: UnsafeMutableRawBufferPointer) -> Step {
        guard case .connected = lifecycle.state else { return .failed("closed") }
        var n = 0
        let code = curl_easy_recv(easy, buffer.baseAddress, buffer.count, &n)
        if code == CURLE_OK { return .moved(n) }
        if code == CURLE_AGAIN { return .again }
        return .failed(message(code))
    }

    /// Closes the connection (libcurl closes the socket through the client's callback). The
    /// caller stops watching `fd` first.
    public func close() { perform(lifecycle.close()) }
}
