import CCurl
import EventLoop
import Glibc
import HTTP1

/// A reusable easy handle and its error buffer. Options every request shares are set once
/// here; per-request options are set by `UpstreamTransfer` and remembered to avoid repeats.
/// libcurl's callbacks and `CURLINFO_PRIVATE` carry the handle, set once, and reach the
/// transfer through it: no option is set per request to say which transfer it is.
final class EasyHandle {
    /// libcurl's handle: the same options for the whole life of this object, but a new libcurl
    /// handle after every transfer (`renew`).
    private(set) var easy: UnsafeMutableRawPointer
    let errorBuffer: UnsafeMutablePointer<CChar>
    /// The transfer running on this handle, from `UpstreamTransfer.init` until the client
    /// releases it (the handle is out of the multi handle then, so no callback comes). Not
    /// retained: the client's in-flight list holds the transfer for exactly that time. Unmanaged,
    /// so the callbacks (one per header line and body chunk) reach it without a retain and a
    /// release each.
    var running: Unmanaged<UpstreamTransfer>?
    /// `running`, as a reference.
    var transfer: UpstreamTransfer? { running?.takeUnretainedValue() }
    private var timeout: Double = -1
    private var pipeWait: Int?
    private var reuseForbidden = false
    private var decodes = false
    /// The TLS settings the handle's options hold now (`setTLS`).
    var appliedTLS: UpstreamTLS?
    /// The `CURLOPT_CONNECT_TO` list of a request to a `serverName` (`setConnectTo`).
    var connectTo: UnsafeMutablePointer<curl_slist>?
    private var method: Method?
    /// The request header list handed to curl: nodes and line bytes in memory this handle owns
    /// and reuses, so a request's headers cost one copy and no allocation per line.
    private var nodes = UnsafeMutablePointer<curl_slist>.allocate(capacity: 0)
    private var nodeCapacity = 0
    private var lineBytes = UnsafeMutablePointer<CChar>.allocate(capacity: 0)
    private var lineCapacity = 0
    /// A response head's storage kept from the previous transfer, so its capacity is reused.
    var spareHead = UpstreamResponseHead(status: 0)
    /// The URL handle libcurl reads a request's URL from (`CURLOPT_CURLU`) while `parsedOrigin`
    /// is the origin parsed into it; see `setURL`.
    private let urlParts: OpaquePointer
    /// The client's TLS session share (`UpstreamClient.tlsSessions`), set on every libcurl handle.
    private let tlsSessions: UnsafeMutableRawPointer?
    private var parsedOrigin: String?
    private var readsURLParts = false

    /// The request shape, which decides the method options.
    enum Method: Equatable {
        case get, head
        case bodiless(method: String)
        case withBody(method: String, length: Int?)
    }

    /// A handle for `client`'s transfers (nil: a handle on its own, as tests make).
    init(client: UpstreamClient?) {
        easy = curl_easy_init()
        urlParts = curl_url()
        tlsSessions = client?.tlsSessions
        errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE))
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE))
        cc_easy_long(easy, CURLOPT_NOSIGNAL, 1)
        cc_easy_str(easy, CURLOPT_PROTOCOLS_STR, "http,https")
        cc_easy_long(easy, CURLOPT_PATH_AS_IS, 1)
        cc_easy_long(easy, CURLOPT_SSL_VERIFYPEER, 1)
        cc_easy_long(easy, CURLOPT_SSL_VERIFYHOST, 2)
        if let caBundle = Self.caBundle { cc_easy_str(easy, CURLOPT_CAINFO, caBundle) }
        cc_easy_long(easy, CURLOPT_HTTP_VERSION, CC_HTTP_VERSION_2TLS)
        cc_easy_long(easy, CURLOPT_BUFFERSIZE, 65536)
        // A pooled TLS connection keeps OpenSSL's buffers rather than allocating 16.7 KB per read.
        _ = cc_easy_keep_tls_buffers(easy)
        cc_easy_ptr(easy, CURLOPT_ERRORBUFFER, errorBuffer)
        if let tlsSessions { cc_easy_ptr(easy, CURLOPT_SHARE, tlsSessions) }
        let me = Unmanaged.passUnretained(self).toOpaque()
        for option in [CURLOPT_PRIVATE, CURLOPT_WRITEDATA, CURLOPT_HEADERDATA, CURLOPT_READDATA] {
            cc_easy_ptr(easy, option, me)
        }
        if !Self.environmentNamesProxy {
            // No proxy variable at start-up: say so once, rather than have libcurl read five
            // environment variables for every transfer (bench/cost-profile.sh).
            cc_easy_str(easy, CURLOPT_PROXY, "")
            cc_easy_str(easy, CURLOPT_NOPROXY, "")
        }
        client?.ownSockets(of: easy)
        // A callback with no transfer (none can come: see `running`) aborts.
        cc_easy_write_function(
            easy,
            { data, size, count, user in
                Unmanaged<EasyHandle>.fromOpaque(user!)._withUnsafeGuaranteedRef { handle in
                    handle.running?._withUnsafeGuaranteedRef { $0.received(data!, size * count) } ?? 0
                }
            })
        cc_easy_header_function(
            easy,
            { data, size, count, user in
                Unmanaged<EasyHandle>.fromOpaque(user!)._withUnsafeGuaranteedRef { handle in
                    handle.running?._withUnsafeGuaranteedRef { $0.receivedHeader(data!, size * count) } ?? 0
                }
            })
        // Before each send of a request (a second comes when libcurl retries on a new connection).
        cc_easy_ptr(easy, CURLOPT_PREREQDATA, me)
        cc_easy_prereq_function(
            easy,
            { user, primaryIP, localIP, primaryPort, localPort in
                Unmanaged<EasyHandle>.fromOpaque(user!)._withUnsafeGuaranteedRef { handle in
                    handle.running?._withUnsafeGuaranteedRef {
                        $0.sending(to: primaryIP, port: Int(primaryPort), from: localIP, localPort: Int(localPort))
                    }
                        ?? false
                } ? CC_PREREQFUNC_OK : CC_PREREQFUNC_ABORT
            })
        cc_easy_read_function(
            easy,
            { data, size, count, user in
                Unmanaged<EasyHandle>.fromOpaque(user!)._withUnsafeGuaranteedRef { handle in
                    handle.running?._withUnsafeGuaranteedRef { $0.send(data!, size * count) } ?? CC_READFUNC_ABORT
                }
            })
    }

    /// Replaces the libcurl handle, after a transfer, by a copy of it that carries every option
    /// and no state (false: libcurl could not make one, and this handle must not be used again).
    ///
    /// libcurl before 8.1.0 keeps a pointer to the last response field it stored for
    /// `curl_easy_header` (`state.prevhead`) after freeing the fields when the handle's next
    /// transfer starts (curl issue 11101; Debian 12's 7.88.1 has no fix). A response whose first
    /// field line begins with a space or tab (obsolete line folding, or an upstream's garbage) is
    /// appended to that freed field before any callback of ours sees the line: a use after free,
    /// which can crash the process. A handle with no transfer behind it has no such pointer, and
    /// refuses the line (`CURLE_BAD_FUNCTION_ARGUMENT`, a 502). The copy keeps every option set on
    /// this one, so what the setters below remember stays true, and the callbacks still find this
    /// object (`CURLOPT_PRIVATE` and the data pointers are copied as set). It costs a handle's
    /// allocation and release per transfer (bench/cost-profile.sh), paid only where needed.
    func renew() -> Bool {
        guard Self.keepsFreedField else { return true }
        guard let fresh = curl_easy_duphandle(easy) else { return false }
        curl_easy_cleanup(easy)
        easy = fresh
        // A copy shares nothing of its original's (`curl_easy_duphandle`).
        if let tlsSessions { cc_easy_ptr(easy, CURLOPT_SHARE, tlsSessions) }
        return true
    }

    /// Whether the libcurl loaded keeps the freed field (`renew`): versions before 8.1.0.
    static let keepsFreedField: Bool = curl_version_info(CURLVERSION_TENTH).pointee.version_num < 0x08_01_00

    deinit {
        curl_easy_cleanup(easy)
        curl_slist_free_all(connectTo)
        curl_url_cleanup(urlParts)
        errorBuffer.deallocate()
        nodes.deallocate()
        lineBytes.deallocate()
    }

    /// Whether the environment names a proxy for libcurl (docs/forwarding.md, "Upstream TLS and HTTP/2"): then
    /// libcurl reads the variables itself for each transfer, as it always has.
    static let environmentNamesProxy = [
        "http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy",
        "ALL_PROXY", "no_proxy", "NO_PROXY",
    ].contains { (name: String) in getenv(name) != nil }

    /// `CURL_CA_BUNDLE` (curl's own name for it): a PEM file of CAs to trust instead of the
    /// system's, for upstreams and identity providers behind a private CA. Verification stays on.
    static let caBundle: String? = getenv("CURL_CA_BUNDLE").map { String(cString: $0) }.flatMap {
        $0.isEmpty ? nil : $0
    }

    // NUL-terminated lines, as HeaderLines holds them; literals, so no array is retained per request.
    private static let expect = StaticBytes("Expect:\0")
    private static let blankAccept = StaticBytes("accept:\0")
    private static let blankContentType = StaticBytes("content-type:\0")
    /// Sent as a line of ours when libcurl decodes (`setDecoding`): libcurl would otherwise
    /// format the same line from the option, an allocation per request.
    private static let identityEncoding = StaticBytes("Accept-Encoding: identity\0")

    /// Sets `lines` and `extra` as the request's header list, plus, when asked, blank `Accept`,
    /// `Content-Type` and `Expect` (curl would otherwise add its own), and while decoding,
    /// `Accept-Encoding: identity`. The list stays valid until the next call: curl reads it while
    /// the transfer runs.
    func setHeaders(
        _ lines: HeaderLines, _ extra: HeaderLines, blankAccept: Bool, blankContentType: Bool, blankExpect: Bool
    ) {
        let byteCount =
            lines.bytes.count + extra.bytes.count + (blankExpect ? Self.expect.count : 0)
            + (blankAccept ? Self.blankAccept.count : 0) + (blankContentType ? Self.blankContentType.count : 0)
            + (decodes ? Self.identityEncoding.count : 0)
        if byteCount > lineCapacity {
            lineBytes.deallocate()
            lineCapacity = max(byteCount, 512)
            lineBytes = .allocate(capacity: lineCapacity)
        }
        var offset = 0
        var node = 0
        func add(_ bytes: UnsafeBufferPointer<UInt8>) {
            guard let base = bytes.baseAddress else { return }
            UnsafeMutableRawPointer(lineBytes + offset).copyMemory(from: base, byteCount: bytes.count)
            // memchr finds each line's NUL (one node per NUL, whatever bytes the builders were
            // given): this runs over every header byte of every request.
            var lineStart = 0
            while lineStart < bytes.count,
                let nul = memchr(base + lineStart, 0, bytes.count - lineStart)
            {
                if node == nodeCapacity { growNodes() }
                nodes[node] = curl_slist(data: lineBytes + offset + lineStart, next: nil)
                node += 1
                lineStart = base.distance(to: nul.assumingMemoryBound(to: UInt8.self)) + 1
            }
            offset += bytes.count
        }
        lines.bytes.withUnsafeBufferPointer(add)
        extra.bytes.withUnsafeBufferPointer(add)
        if blankExpect { add(Self.expect.buffer) }
        if blankAccept { add(Self.blankAccept.buffer) }
        if blankContentType { add(Self.blankContentType.buffer) }
        if decodes { add(Self.identityEncoding.buffer) }
        // Linked once the array holds every node (growing it moves them).
        for i in 0..<max(0, node - 1) { nodes[i].next = nodes + i + 1 }
        // curl keeps the pointer and reads the list when the transfer starts: nodes rewritten in
        // place need no new option, only a moved (or emptied) list does.
        let list = node > 0 ? nodes : nil
        guard list != headerList else { return }
        headerList = list
        cc_easy_slist(easy, CURLOPT_HTTPHEADER, list)
    }

    private func growNodes() {
        let larger = UnsafeMutablePointer<curl_slist>.allocate(capacity: max(16, nodeCapacity * 2))
        larger.moveInitialize(from: nodes, count: nodeCapacity)
        nodes.deallocate()
        nodes = larger
        nodeCapacity = max(16, nodeCapacity * 2)
    }

    /// The list last handed to curl (nil: no header lines).
    private(set) var headerList: UnsafeMutablePointer<curl_slist>?

    /// The request's URL. libcurl parses a URL string anew for every transfer (`CURLOPT_URL`:
    /// its scheme, host, port, a junk scan of every part), a noticeable share of a forwarded
    /// request's instructions (bench/floor-proxy.c measures it). Given a URL handle (`CURLOPT_CURLU`) it
    /// copies the parts instead. So the origin is parsed into this handle's URL parts once, with
    /// the flags libcurl parses a string with, and each request sets only its path and query.
    /// libcurl stores a part as given except that it lowercases a percent-encoding's hex digits
    /// and checks nothing; parsed from a string, the same part is checked (control bytes, spaces)
    /// and split at `?` and `#`. A part that either would change (`RequestURL.partIsVerbatim`), a
    /// URL given whole, or an origin libcurl refuses, goes as a string, as before: what libcurl
    /// sends is the same either way. (libcurl 7.88 then keeps the first transfer's URL as its
    /// "current" one, `CURLINFO_EFFECTIVE_URL`, which nothing here reads; its own resends take
    /// the URL from the handle's parts again.)
    func setURL(_ target: RequestURL) {
        if !target.path.isEmpty, originParsed(target.origin),
            RequestURL.partIsVerbatim(target.path, query: false),
            target.query.map({ RequestURL.partIsVerbatim($0, query: true) }) ?? true,
            // A part libcurl refuses (over 8,000,000 bytes) leaves the last request's in place:
            // the string then, which libcurl refuses as before.
            target.path.withCString({ curl_url_set(urlParts, CURLUPART_PATH, $0, 0) }) == CURLUE_OK,
            (target.query.map { query in query.withCString { curl_url_set(urlParts, CURLUPART_QUERY, $0, 0) } }
                ?? curl_url_set(urlParts, CURLUPART_QUERY, nil, 0)) == CURLUE_OK
        {
            if !readsURLParts {
                readsURLParts = true
                cc_easy_curlu(easy, urlParts)
            }
        } else {
            if readsURLParts {
                readsURLParts = false
                cc_easy_curlu(easy, nil)
            }
            target.withCString { _ = cc_easy_str(easy, CURLOPT_URL, $0) }
        }
    }

    /// Whether `origin` is the one parsed into the URL parts (parsing it when it is another).
    private func originParsed(_ origin: String) -> Bool {
        if parsedOrigin == origin { return true }
        parsedOrigin = nil
        let flags = UInt32(CURLU_GUESS_SCHEME | CURLU_NON_SUPPORT_SCHEME | CURLU_PATH_AS_IS)
        guard (origin + "/").withCString({ curl_url_set(urlParts, CURLUPART_URL, $0, flags) }) == CURLUE_OK else {
            return false
        }
        parsedOrigin = origin
        return true
    }

    /// libcurl closes the connection when this transfer ends, rather than pool it, until
    /// `allowReuse` (`UpstreamTransfer.endOfTLSBody`).
    func forbidReuse() {
        guard !reuseForbidden else { return }
        reuseForbidden = true
        cc_easy_long(easy, CURLOPT_FORBID_REUSE, 1)
    }

    func allowReuse() {
        guard reuseForbidden else { return }
        reuseForbidden = false
        cc_easy_long(easy, CURLOPT_FORBID_REUSE, 0)
    }

    /// Whether libcurl asks for identity and decodes a body that comes encoded anyway
    /// (`UpstreamRequest.decodesContent`); off, bodies pass as the upstream encoded them.
    func setDecoding(_ on: Bool) {
        guard on != decodes else { return }
        decodes = on
        if on {
            cc_easy_str(easy, CURLOPT_ACCEPT_ENCODING, "identity")
        } else {
            cc_easy_ptr(easy, CURLOPT_ACCEPT_ENCODING, nil)
        }
    }

    /// Whether a transfer waits for a connection being set up to say if it multiplexes.
    func setPipeWait(_ wait: Bool) {
        guard pipeWait != (wait ? 1 : 0) else { return }
        pipeWait = wait ? 1 : 0
        cc_easy_long(easy, CURLOPT_PIPEWAIT, wait ? 1 : 0)
    }

    /// Connect timeout (capped at 10 s) and the stall limit: below 1 byte/s for `seconds` ends the transfer.
    func setTimeout(_ seconds: Double) {
        guard seconds != timeout else { return }
        timeout = seconds
        // The stall timeout is the client's sweep (`UpstreamTransfer.deadline`), not libcurl's
        // low-speed check.
        cc_easy_long(easy, CURLOPT_CONNECTTIMEOUT_MS, Int(min(seconds, 10) * 1000))
    }

    func setMethod(_ next: Method) {
        guard next != method else { return }
        method = next
        // Back to a plain GET first, so nothing of the previous request's method remains.
        cc_easy_ptr(easy, CURLOPT_CUSTOMREQUEST, nil)
        cc_easy_long(easy, CURLOPT_NOBODY, 0)
        cc_easy_long(easy, CURLOPT_HTTPGET, 1)
        switch next {
        case .get:
            break
        case .head:
            cc_easy_long(easy, CURLOPT_NOBODY, 1)
        case .bodiless(let name) where ["POST", "PUT", "PATCH"].contains(name):
            // These methods announce an empty body with Content-Length: 0.
            cc_easy_long(easy, CURLOPT_POST, 1)
            cc_easy_ptr(easy, CURLOPT_POSTFIELDS, nil)
            cc_easy_off(easy, CURLOPT_POSTFIELDSIZE_LARGE, 0)
            if name != "POST" { cc_easy_str(easy, CURLOPT_CUSTOMREQUEST, name) }
        case .bodiless(let name):
            // DELETE, OPTIONS, …: the method on a GET-shaped request, no framing fields at all.
            cc_easy_str(easy, CURLOPT_CUSTOMREQUEST, name)
        case .withBody(let name, let length):
            cc_easy_long(easy, CURLOPT_POST, 1)
            cc_easy_ptr(easy, CURLOPT_POSTFIELDS, nil)
            cc_easy_off(easy, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(length ?? -1))
            if name != "POST" { cc_easy_str(easy, CURLOPT_CUSTOMREQUEST, name) }
        }
    }
}

extension UpstreamClient {
    /// Has the client open and close `easy`'s connection sockets (`openSocket`, `closeSocket`), so
    /// the loop knows every socket libcurl uses, a transfer's or a tunnel's. Unretained: the client
    /// cleans up its multi handles, closing every connection, before it goes.
    func ownSockets(of easy: UnsafeMutableRawPointer) {
        let owner = Unmanaged.passUnretained(self).toOpaque()
        cc_easy_ptr(easy, CURLOPT_OPENSOCKETDATA, owner)
        cc_easy_ptr(easy, CURLOPT_CLOSESOCKETDATA, owner)
        cc_easy_open_socket_function(
            easy,
            { clientp, _, address in
                Unmanaged<UpstreamClient>.fromOpaque(clientp!)._withUnsafeGuaranteedRef { $0.openSocket(address!) }
            })
        cc_easy_close_socket_function(
            easy,
            { clientp, fd in
                Unmanaged<UpstreamClient>.fromOpaque(clientp!)._withUnsafeGuaranteedRef { $0.closeSocket(fd) }
            })
    }
}
