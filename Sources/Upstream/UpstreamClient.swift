import CCurl
import HTTP1
import EventLoop
import Glibc

/// One libcurl multi handle driven by one event loop, exactly as curl's `ephiperfifo.c`:
/// the socket callback maps `CURL_POLL_*` to epoll interest, the timer callback only arms a
/// loop timer, and `curl_multi_socket_action` runs from loop events, never from a callback.
/// Connections to upstreams are pooled by the multi handle; easy handles are reused.
public final class UpstreamClient {
    let loop: EventLoop
    let multi: UnsafeMutableRawPointer
    /// The loop timer for curl's timeout, and when it fires.
    private var timer: TimerID?
    private var timerDeadline: NanoTime?
    /// The one loop timer for every transfer's deadline (response head, or a stalled body),
    /// armed at the earliest (a timer per transfer cost a heap insert and removal per request:
    /// ~4 % of our instructions).
    private var sweep: TimerID?
    private var sweepDeadline: NanoTime?
    /// curl asked to be called at once, and that call is queued (`EventLoop.runDue`).
    private var kickQueued = false
    private let kick = Kick()
    /// When curl last asked to be called (nil: it asked for no timeout).
    private var curlDeadline: NanoTime?
    /// curl's sockets by descriptor: an array, not a dictionary, since curl reports sockets
    /// several times per request (docs/ARCHITECTURE.md §13).
    private var sockets = SocketTable()
    private var idleHandles: [EasyHandle] = []
    /// Transfers in flight; each knows its index here (`activeIndex`), so removal is O(1).
    private var active: [UpstreamTransfer] = []
    /// Non-zero while libcurl is running our callbacks: handles must not be removed then.
    var callbackDepth = 0
    /// Makes libcurl close pooled connections their servers closed, while no request comes;
    /// made when the first such connection is seen.
    private var reaper: ConnectionReaper?
    /// Connections parked since the loop's last wait, not yet known quiet (`QuietSockets`).
    private var parked = ParkedSockets()
    /// Transfers with a request body started since curl's last timeout call, which runs their
    /// connect step: until then a pooled connection is checked by the kernel (`QuietSockets.strictKey`).
    private var bodiesStarting = 0

    /// Initialises libcurl once per process; call before any loop thread starts.
    public static func globalInit() { _ = initialised }
    private static let initialised: Bool = curl_global_init(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK

    /// Creates the client of `loop` (call on that loop's thread or before it runs).
    public init(loop: EventLoop) {
        Self.globalInit()
        self.loop = loop
        multi = curl_multi_init()
        kick.client = self
        let me = Unmanaged.passUnretained(self).toOpaque()
        cc_multi_socket_function(multi, { _, fd, what, userp, _ in
            Unmanaged<UpstreamClient>.fromOpaque(userp!)._withUnsafeGuaranteedRef { $0.socketChanged(fd, what) }
            return 0
        })
        cc_multi_ptr(multi, CURLMOPT_SOCKETDATA, me)
        cc_multi_timer_function(multi, { _, timeout, userp in
            Unmanaged<UpstreamClient>.fromOpaque(userp!)._withUnsafeGuaranteedRef { $0.timerChanged(timeout) }
            return 0
        })
        cc_multi_ptr(multi, CURLMOPT_TIMERDATA, me)
        cc_multi_long(multi, CURLMOPT_PIPELINING, CC_PIPE_MULTIPLEX)
        cc_multi_long(multi, CURLMOPT_MAXCONNECTS, 512)
    }

    deinit {
        // The sweep's action is unretained: it must not outlive the client.
        if let sweep { loop.cancel(sweep) }
        // A queued call at once finds no client.
        kick.client = nil
        reaper?.detach(from: multi)
        curl_multi_cleanup(multi)
        // `timeoutAction` does not retain the client: its timer (armed last, perhaps by the
        // cleanup) must not outlive it.
        if let timer { loop.cancel(timer) }
    }

    /// A parked pooled connection reported EOF: have libcurl close it soon.
    func deadConnectionSeen() {
        if reaper == nil { reaper = ConnectionReaper(client: self) }
        reaper?.deadConnectionSeen()
    }

    /// Starts `request`; events go to `delegate` on this loop. `body` streams the request body.
    public func start(_ request: borrowing UpstreamRequest, body: RequestBody?, delegate: any UpstreamTransferDelegate) -> UpstreamTransfer {
        let handle = idleHandles.popLast() ?? EasyHandle(client: self)
        let transfer = UpstreamTransfer(client: self, handle: handle, request: request, body: body, delegate: delegate)
        if request.hasBody { bodiesStarting += 1 }
        transfer.activeIndex = active.count
        active.append(transfer)
        let result = curl_multi_add_handle(multi, handle.easy)
        if result != CURLM_OK {
            loop.afterEvents { transfer.finish(.unreachable("curl_multi_add_handle: \(result.rawValue)")) }
        }
        return transfer
    }

    /// Number of transfers in flight on this loop.
    public var activeTransfers: Int { active.count }

    /// Detaches a finished or cancelled transfer and keeps its easy handle for the next one.
    func release(_ transfer: UpstreamTransfer) {
        let index = transfer.activeIndex
        guard index >= 0 else { return }
        let last = active.removeLast()
        if index < active.count {
            active[index] = last
            last.activeIndex = index
        }
        transfer.activeIndex = -1
        curl_multi_remove_handle(multi, transfer.handle.easy)
        transfer.handle.running = nil
        idleHandles.append(transfer.handle)
    }

    // MARK: libcurl callbacks (they only record what to watch)

    private func socketChanged(_ fd: curl_socket_t, _ what: Int32) {
        if what == CC_POLL_REMOVE {
            // A pooled connection between transfers: keep its registration (the next transfer
            // usually watches it the same way) and drop it only if it turns ready while parked.
            if let socket = sockets[fd], case .watched(let interest) = socket.state {
                socket.park(interest)
                parked.add(socket, iteration: loop.iterations)
            }
            return
        }
        var interest: Interest = []
        if what == CC_POLL_IN || what == CC_POLL_INOUT { interest.insert(.read) }
        if what == CC_POLL_OUT || what == CC_POLL_INOUT { interest.insert(.write) }
        guard let socket = sockets[fd] else {
            let socket = CurlSocket(fd: fd, client: self, opened: false)
            sockets[fd] = socket
            return watch(socket, interest)
        }
        switch socket.state {
        case .unregistered:
            watch(socket, interest)
        case .watched(let current) where current == interest:
            return
        case .parked(let current) where socket.established && current == interest:
            // The same pooled connection, still registered: no syscall when it is watched as
            // before, the usual case for every request on it. `established` (it carried a
            // transfer) is what makes that sure: libcurl 7.88 closes a socket that never connected
            // (a refused or timed-out connect, a happy-eyeballs loser) without the closing
            // callback, and its number may since name another socket.
            socket.state = .watched(interest)
        case .watched, .parked:
            // `claim` (MOD, or ADD when the kernel has no entry), one syscall either way: right
            // whether the number still names the registered socket or a new one (a resolver's
            // socketpair, or a socket curl closed without the callback).
            do { try loop.claim(fd: fd, interest: interest, target: socket) } catch { return drop(socket) }
            socket.state = .watched(interest)
        }
        // A connecting socket is watched for writing only; one watched for reading has connected.
        if interest.contains(.read) && socket.opened { socket.established = true }
    }

    private func watch(_ socket: CurlSocket, _ interest: Interest) {
        do { try loop.register(fd: socket.fd, interest: interest, target: socket) } catch { return drop(socket) }
        socket.state = .watched(interest)
    }

    private func drop(_ socket: CurlSocket) {
        socket.state = .unregistered
        if sockets[socket.fd] === socket { sockets[socket.fd] = nil }
    }

    /// curl opens a connection socket (`CURLOPT_OPENSOCKETFUNCTION`): its number names a new
    /// socket, so whatever was known of an earlier one with that number (closed behind our back)
    /// is forgotten. The closing callback below then reports its end.
    fileprivate func openSocket(_ address: UnsafeMutablePointer<curl_sockaddr>) -> curl_socket_t {
        let fd = Glibc.socket(address.pointee.family, address.pointee.socktype | Int32(SOCK_CLOEXEC.rawValue), address.pointee.protocol)
        guard fd >= 0 else { return CC_SOCKET_BAD }
        QuietSockets.mark(fd, .unknown)
        let socket = CurlSocket(fd: fd, client: self, opened: true)
        let stale = sockets[fd]
        sockets[fd] = socket
        if let stale {
            loop.forget(fd: fd)
            // curl closed the earlier socket without removing its watch (it never connected):
            // curl still counts that watch as current and will not ask again for the same one,
            // so the new socket takes it over.
            if case .watched(let interest) = stale.state { watch(socket, interest) }
        }
        return fd
    }

    /// curl closes a connection socket it opened through `openSocket`. Closing takes it out of the
    /// epoll set (the descriptor is not shared: `SOCK_CLOEXEC`, never duplicated), so the loop
    /// forgets it with no `epoll_ctl`.
    fileprivate func closeSocket(_ fd: curl_socket_t) -> Int32 {
        if let socket = sockets[fd] {
            socket.state = .unregistered
            loop.forget(fd: fd)
            sockets[fd] = nil
        }
        // Last, before the number can name another socket, perhaps another thread's.
        QuietSockets.mark(fd, .unknown)
        return Glibc.close(fd)
    }

    /// curl re-arms its timeout more than once per transfer, mostly to later deadlines. The loop
    /// timer is moved only when the new deadline is earlier; one that fires early re-arms itself
    /// for what curl asked last (the way `HTTPConnection` keeps its one timer).
    /// At once (0, once per transfer: after `curl_multi_add_handle`) is a queued call, not a
    /// timer: the timer armed for a later deadline stays as it is.
    private func timerChanged(_ milliseconds: Int) {
        guard milliseconds >= 0 else {
            curlDeadline = nil
            return
        }
        if milliseconds == 0 {
            curlDeadline = loop.now
            if !kickQueued {
                kickQueued = true
                loop.runDue(kickAction)
            }
            return
        }
        let deadline = loop.now.adding(seconds: Double(milliseconds) / 1000)
        curlDeadline = deadline
        arm(deadline)
    }

    /// What `runDue` holds while a call at once is queued: the client, unretained, until it goes.
    private final class Kick {
        unowned(unsafe) var client: UpstreamClient?
    }

    /// Made once, so queueing it allocates nothing.
    private lazy var kickAction: () -> Void = { [kick] in kick.client?.kicked() }

    private func kicked() {
        kickQueued = false
        curlTimeoutDue()
    }

    /// curl's timeout, if it asked for one, is due: call it, or wait on if it moved later.
    private func curlTimeoutDue() {
        guard let due = curlDeadline else { return }
        if due > loop.now { return arm(due) }
        curlDeadline = nil
        socketAction(fd: CC_SOCKET_TIMEOUT, events: 0)
    }

    private func arm(_ deadline: NanoTime) {
        if let timerDeadline, timerDeadline <= deadline { return }
        if let timer { loop.cancel(timer) }
        timerDeadline = deadline
        timer = loop.schedule(at: deadline, timeoutAction)
    }

    /// A transfer's `deadline` is `deadline` (or later): the sweep runs by then.
    func deadlineAwaited(_ deadline: NanoTime) {
        if let sweepDeadline, sweepDeadline <= deadline { return }
        if let sweep { loop.cancel(sweep) }
        sweepDeadline = deadline
        sweep = loop.schedule(at: deadline, sweepAction)
    }

    /// Ends every transfer whose head is overdue or whose body stalled, then re-arms for the
    /// earliest deadline left. A transfer's deadline is set with a sweep armed for it, and
    /// otherwise only moves later (a byte moved), so the sweep finds each overdue one at the
    /// latest when the earliest deadline it was armed for passes.
    private func sweepDeadlines() {
        sweep = nil
        sweepDeadline = nil
        let now = loop.now
        var overdue: [UpstreamTransfer] = []
        var next: NanoTime?
        for transfer in active {
            guard let deadline = transfer.deadline else { continue }
            if deadline <= now {
                overdue.append(transfer)
            } else if next.map({ deadline < $0 }) ?? true {
                next = deadline
            }
        }
        // At most ten sweeps a second: each walks every transfer, so under a crowd of deadlines
        // (a stalled upstream, thousands waiting) one sweep per deadline would cost the square
        // of the crowd per timeout. A deadline in the 0.1 s after a sweep is met up to 0.1 s late.
        if let next { deadlineAwaited(max(next, now.adding(seconds: 0.1))) }
        // Finishing one may start or end others (a retry, a cancelled pair): each is checked again.
        for transfer in overdue { transfer.deadlinePassed() }
    }

    /// Made once, like `timeoutAction`.
    private lazy var sweepAction: () -> Void = { [unowned(unsafe) self] in self.sweepDeadlines() }

    /// Made once, so arming the timer allocates nothing. Unretained, and cancelled in `deinit`
    /// (the client is released on its loop's thread, or after the loop stopped): a weak
    /// reference would give the client a side table, and every retain of it, several per
    /// transfer, would take the slow path (docs/ARCHITECTURE.md §13).
    private lazy var timeoutAction: () -> Void = { [unowned(unsafe) self] in
        self.timer = nil
        self.timerDeadline = nil
        self.curlTimeoutDue()
    }

    // MARK: driving

    func socketAction(fd: CInt, events: Int32) {
        parked.promote(dispatched: loop.batchesDispatched)
        var running: Int32 = 0
        callbackDepth += 1
        // Any call may run a new transfer's connect step (curl runs due timeouts with socket
        // events too); the timeout call runs every one started before it.
        let starting = bodiesStarting
        QuietSockets.asking(strictly: starting > 0) {
            curl_multi_socket_action(multi, fd, events, &running)
        }
        if fd == CC_SOCKET_TIMEOUT { bodiesStarting -= starting }
        callbackDepth -= 1
        drainCompleted()
    }

    /// Resumes a paused direction of a transfer; libcurl may call back synchronously.
    func unpause(_ transfer: UpstreamTransfer, mask: Int32) {
        parked.promote(dispatched: loop.batchesDispatched)
        callbackDepth += 1
        curl_easy_pause(transfer.handle.easy, mask)
        callbackDepth -= 1
        drainCompleted()
    }

    private func drainCompleted() {
        var remaining: Int32 = 0
        while let message = curl_multi_info_read(multi, &remaining) {
            guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle else { continue }
            if reaper?.finished(easy) == true { continue }
            var handlePointer: UnsafeMutableRawPointer?
            guard cc_info_ptr(easy, CURLINFO_PRIVATE, &handlePointer) == CURLE_OK, let handlePointer,
                  let transfer = Unmanaged<EasyHandle>.fromOpaque(handlePointer).takeUnretainedValue().transfer,
                  transfer.activeIndex >= 0 else { continue }
            transfer.completed(code: cc_msg_result(message))
        }
    }
}

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
    /// Times parked, to tell the parking a `ParkedSockets` entry was made for from a later one.
    private(set) var parkings: UInt32 = 0
    /// Turned readable while parked (`ready`): never to be reused (`QuietSockets.Mark.spoiled`).
    private(set) var spoiled = false

    init(fd: CInt, client: UpstreamClient, opened: Bool) {
        self.fd = fd
        self.client = client
        self.opened = opened
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

    /// What libcurl's zero-timeout checks of this socket get (`QuietSockets`): for a connected
    /// socket parked between transfers and still registered for reading, the kernel's answer
    /// until a wait saw it quiet, then "nothing" without the kernel (it is taken out when
    /// something comes). Otherwise always the kernel's: while curl watches a socket it reads on
    /// as long as the kernel says data is pending.
    var readiness: QuietSockets.Mark {
        if spoiled && established { return .spoiled }
        guard established, case .parked(let interest) = state, interest.contains(.read) else { return .unknown }
        return quiet ? .quiet : .parked
    }

    private func publishReadiness() { QuietSockets.mark(fd, readiness) }

    func ready(_ events: UInt32) {
        if case .parked = state {
            // Activity on an idle pooled connection (the server closed it, or sent bytes no
            // request asked for): stop watching, answer libcurl's next check of it with an error
            // so it is never reused, and have curl close it soon rather than hold the descriptor
            // until the next request.
            client.loop.deregister(fd: fd)
            spoiled = true
            state = .unregistered
            client.deadConnectionSeen()
            return
        }
        var mask: Int32 = 0
        if ReadyEvents.isReadable(events) { mask |= CC_CSELECT_IN }
        if ReadyEvents.isWritable(events) { mask |= CC_CSELECT_OUT }
        if ReadyEvents.isError(events) { mask |= CC_CSELECT_ERR }
        client.socketAction(fd: fd, events: mask)
    }
}

/// A reusable easy handle and its error buffer. Options every request shares are set once
/// here; per-request options are set by `UpstreamTransfer` and remembered to avoid repeats.
/// libcurl's callbacks and `CURLINFO_PRIVATE` carry the handle, set once, and reach the
/// transfer through it: no option is set per request to say which transfer it is.
final class EasyHandle {
    let easy: UnsafeMutableRawPointer
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
        cc_easy_ptr(easy, CURLOPT_ERRORBUFFER, errorBuffer)
        let me = Unmanaged.passUnretained(self).toOpaque()
        for option in [CURLOPT_PRIVATE, CURLOPT_WRITEDATA, CURLOPT_HEADERDATA, CURLOPT_READDATA] { cc_easy_ptr(easy, option, me) }
        if !Self.environmentNamesProxy {
            // No proxy variable at start-up: say so once, rather than have libcurl read five
            // environment variables for every transfer (docs/ARCHITECTURE.md §13).
            cc_easy_str(easy, CURLOPT_PROXY, "")
            cc_easy_str(easy, CURLOPT_NOPROXY, "")
        }
        if let client {
            // Connection sockets are opened and closed by the client (`openSocket`, `closeSocket`).
            // Unretained: the client cleans up its multi handle, closing every connection, before it goes.
            let owner = Unmanaged.passUnretained(client).toOpaque()
            cc_easy_ptr(easy, CURLOPT_OPENSOCKETDATA, owner)
            cc_easy_ptr(easy, CURLOPT_CLOSESOCKETDATA, owner)
            cc_easy_open_socket_function(easy, { clientp, _, address in
                Unmanaged<UpstreamClient>.fromOpaque(clientp!)._withUnsafeGuaranteedRef { $0.openSocket(address!) }
            })
            cc_easy_close_socket_function(easy, { clientp, fd in
                Unmanaged<UpstreamClient>.fromOpaque(clientp!)._withUnsafeGuaranteedRef { $0.closeSocket(fd) }
            })
        }
        // A callback with no transfer (none can come: see `running`) aborts.
        cc_easy_write_function(easy, { data, size, count, user in
            Unmanaged<EasyHandle>.fromOpaque(user!)._withUnsafeGuaranteedRef { handle in
                handle.running?._withUnsafeGuaranteedRef { $0.received(data!, size * count) } ?? 0
            }
        })
        cc_easy_header_function(easy, { data, size, count, user in
            Unmanaged<EasyHandle>.fromOpaque(user!)._withUnsafeGuaranteedRef { handle in
                handle.running?._withUnsafeGuaranteedRef { $0.receivedHeader(data!, size * count) } ?? 0
            }
        })
        cc_easy_read_function(easy, { data, size, count, user in
            Unmanaged<EasyHandle>.fromOpaque(user!)._withUnsafeGuaranteedRef { handle in
                handle.running?._withUnsafeGuaranteedRef { $0.send(data!, size * count) } ?? CC_READFUNC_ABORT
            }
        })
    }

    deinit {
        curl_easy_cleanup(easy)
        curl_url_cleanup(urlParts)
        errorBuffer.deallocate()
        nodes.deallocate()
        lineBytes.deallocate()
    }

    /// Whether the environment names a proxy for libcurl (README, "Upstream TLS and HTTP/2"): then
    /// libcurl reads the variables itself for each transfer, as it always has.
    static let environmentNamesProxy = ["http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy",
                                        "ALL_PROXY", "no_proxy", "NO_PROXY"].contains { (name: String) in getenv(name) != nil }

    /// `CURL_CA_BUNDLE` (curl's own name for it): a PEM file of CAs to trust instead of the
    /// system's, for upstreams and identity providers behind a private CA. Verification stays on.
    static let caBundle: String? = getenv("CURL_CA_BUNDLE").map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 }

    // NUL-terminated lines, as HeaderLines holds them; literals, so no array is retained per request.
    private static let expect = StaticBytes("Expect:\0")
    private static let blankAccept = StaticBytes("accept:\0")
    private static let blankContentType = StaticBytes("content-type:\0")

    /// Sets `lines` and `extra` as the request's header list, plus, when asked, blank `Accept`,
    /// `Content-Type` and `Expect` (curl would otherwise add its own). The list stays valid until
    /// the next call: curl reads it while the transfer runs.
    func setHeaders(_ lines: HeaderLines, _ extra: HeaderLines, blankAccept: Bool, blankContentType: Bool, blankExpect: Bool) {
        let byteCount = lines.bytes.count + extra.bytes.count + (blankExpect ? Self.expect.count : 0)
            + (blankAccept ? Self.blankAccept.count : 0) + (blankContentType ? Self.blankContentType.count : 0)
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
                  let nul = memchr(base + lineStart, 0, bytes.count - lineStart) {
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
    /// its scheme, host, port, a junk scan of every part), about 10k instructions of a forwarded
    /// request's 119k (measured with bench/floor-proxy.c). Given a URL handle (`CURLOPT_CURLU`) it
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
               ?? curl_url_set(urlParts, CURLUPART_QUERY, nil, 0)) == CURLUE_OK {
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
        guard (origin + "/").withCString({ curl_url_set(urlParts, CURLUPART_URL, $0, flags) }) == CURLUE_OK else { return false }
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
