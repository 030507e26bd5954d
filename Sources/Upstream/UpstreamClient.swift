import CCurl
import EventLoop
import Glibc
import HTTP1

/// One libcurl multi handle driven by one event loop, exactly as curl's `ephiperfifo.c`:
/// the socket callback maps `CURL_POLL_*` to epoll interest, the timer callback only arms a
/// loop timer, and `curl_multi_socket_action` runs from loop events, never from a callback.
/// Connections to upstreams are pooled by the multi handle; easy handles are reused, each with a
/// new libcurl handle per transfer (`EasyHandle.renew`).
public final class UpstreamClient {
    let loop: EventLoop
    let multi: UnsafeMutableRawPointer
    /// The TLS sessions of this client's transfers (`CURL_LOCK_DATA_SSL_SESSION`): a libcurl
    /// handle's own cache would go with it after its one transfer (`EasyHandle.renew`), and a new
    /// connection would verify the upstream's certificate chain again instead of resuming.
    let tlsSessions: UnsafeMutableRawPointer?
    /// The loop timer for curl's timeout, and when it fires.
    private var timer: TimerID?
    private var timerDeadline: NanoTime?
    /// The one loop timer for every transfer's deadline (response head, or a stalled body),
    /// armed at the earliest (a timer per transfer would cost a heap insert and removal per
    /// request; bench/cost-profile.sh counts them).
    private var sweep: TimerID?
    private var sweepDeadline: NanoTime?
    /// curl asked to be called at once, and that call is queued (`EventLoop.runDue`).
    private var kickQueued = false
    private let kick = Kick()
    /// When curl last asked to be called (nil: it asked for no timeout).
    private var curlDeadline: NanoTime?
    /// curl's sockets by descriptor: an array, not a dictionary, since curl reports sockets
    /// several times per request (bench/cost-profile.sh).
    var sockets = SocketTable()
    private var idleHandles: [EasyHandle] = []
    /// Transfers in flight; each knows its index here (`activeIndex`), so removal is O(1).
    private var active: [UpstreamTransfer] = []
    /// Non-zero while libcurl is running our callbacks: handles must not be removed then.
    var callbackDepth = 0
    /// Makes libcurl close pooled connections their servers closed, while no request comes;
    /// made when the first such connection is seen.
    private(set) var reaper: ConnectionReaper?
    /// Connections parked since the loop's last wait, not yet known quiet (told to `tuning`).
    private var parked = ParkedSockets()
    /// Transfers with a request body started since curl's last timeout call, which runs their
    /// connect step: until then a pooled connection is checked by the kernel (`UpstreamTuning.runLibcurl(strict:_:)`).
    private var bodiesStarting = 0
    /// The tuning of libcurl's system calls, when one is installed (`installedTuning`); nil, libcurl runs plainly.
    private(set) var tuning: (any UpstreamTuning)?
    /// The proxy's own listeners, which a request with `refusesOwnListeners` never connects to.
    public var ownListeners: OwnListeners?
    /// This loop's copy of `ownListeners`, taken at the first hop checked after they were set.
    private var ownListenersCopy: OwnListeners.Snapshot?

    /// Whether a hop to `primary`:`port` from `local` would reach one of the proxy's own listeners.
    func reachesOwnListener(primary: UnsafePointer<CChar>, port: Int, local: UnsafePointer<CChar>) -> Bool {
        if case .none = ownListenersCopy {
            guard let copy = ownListeners?.snapshot() else { return false }
            ownListenersCopy = copy
        }
        return ownListenersCopy!.contains(primary: primary, port: port, local: local)
    }

    /// The tuning each new client gets: set once at start, before any loop thread (the
    /// executable's `LibcurlTuning.start`), and only read after.
    nonisolated(unsafe) public static var installedTuning: (any UpstreamTuning.Type)?

    /// Initialises libcurl once per process; call before any loop thread starts.
    public static func globalInit() { _ = initialised }
    private static let initialised: Bool = curl_global_init(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK

    /// Creates the client of `loop` (call on that loop's thread or before it runs), tuned by
    /// `tuning` when there is one.
    public init(loop: EventLoop, tuning: (any UpstreamTuning.Type)? = UpstreamClient.installedTuning) {
        Self.globalInit()
        self.loop = loop
        multi = curl_multi_init()
        tlsSessions = curl_share_init()
        if let tlsSessions { _ = cc_share_tls_sessions(tlsSessions) }
        kick.client = Unretained(self)
        let me = Unmanaged.passUnretained(self).toOpaque()
        cc_multi_socket_function(
            multi,
            { easy, fd, what, userp, _ in
                Unmanaged<UpstreamClient>.fromOpaque(userp!)._withUnsafeGuaranteedRef {
                    $0.socketChanged(fd, what, by: easy)
                }
                return 0
            })
        cc_multi_ptr(multi, CURLMOPT_SOCKETDATA, me)
        cc_multi_timer_function(
            multi,
            { _, timeout, userp in
                Unmanaged<UpstreamClient>.fromOpaque(userp!)._withUnsafeGuaranteedRef { $0.timerChanged(timeout) }
                return 0
            })
        cc_multi_ptr(multi, CURLMOPT_TIMERDATA, me)
        cc_multi_long(multi, CURLMOPT_PIPELINING, CC_PIPE_MULTIPLEX)
        cc_multi_long(multi, CURLMOPT_MAXCONNECTS, 512)
        if let tuning {
            // Unretained: the tuning is this client's own, so the client outlives it.
            let client = Unretained(self)
            self.tuning = tuning.init(loop: loop, rerun: { fd in client.object.rerun(fd) })
        }
    }

    /// Runs curl on `fd` for reading within the current pass, for the tuning (`UpstreamTuning.init`):
    /// false when curl does not watch it for reading.
    private func rerun(_ fd: CInt) -> Bool {
        guard watchesForReading(fd) else { return false }
        var running: Int32 = 0
        runCurl(strict: bodiesStarting > 0) { curl_multi_socket_action(multi, fd, CC_CSELECT_IN, &running) }
        return true
    }

    /// Runs `body`, a pass of libcurl, through the tuning when there is one.
    @inline(__always)
    private func runCurl(strict: Bool, _ body: () -> Void) {
        guard let tuning else { return body() }
        tuning.runLibcurl(strict: strict, body)
    }

    deinit {
        // The sweep's action is unretained: it must not outlive the client.
        if let sweep { loop.cancel(sweep) }
        // A queued call at once finds no client.
        kick.client = nil
        reaper?.detach(from: multi)
        curl_multi_cleanup(multi)
        // The share goes once no handle uses it; a transfer still held elsewhere keeps it (libcurl
        // refuses the cleanup then), to the end of the process.
        idleHandles.removeAll()
        if let tlsSessions { _ = curl_share_cleanup(tlsSessions) }
        // `timeoutAction` does not retain the client: its timer (armed last, perhaps by the
        // cleanup) must not outlive it.
        if let timer { loop.cancel(timer) }
    }

    /// A parked connection turned readable (an EOF, a reset, bytes no request asked for): its
    /// descriptor is made to read as closed, so libcurl's own liveness check drops it
    /// (`ClosedSocket` says why that is needed). Not while the transfer that parked it is paused
    /// (it still uses the connection) or has no head yet (it failed, and libcurl closes the
    /// connection itself, after `keepEarlyAnswer` read what it holds).
    func connectionSpoiled(_ socket: CurlSocket) {
        if let user = socket.user,
            active.contains(where: { $0.handle.easy == user && ($0.isPaused || $0.headAwaited) })
        {
            return
        }
        _ = ClosedSocket.replace(socket.fd)
    }

    /// Whether a peek at `fd` finds bytes or an error (a reset) rather than nothing yet or an EOF.
    private static func holdsUnread(_ fd: CInt) -> Bool {
        var byte: UInt8 = 0
        let got = recvfrom(fd, &byte, 1, CInt(MSG_PEEK | MSG_DONTWAIT), nil, nil)
        return got > 0 || (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
    }

    /// A parked pooled connection reported EOF: have libcurl close it soon.
    func deadConnectionSeen() {
        if reaper == nil { reaper = ConnectionReaper(client: self) }
        reaper?.deadConnectionSeen()
    }

    /// Starts `request`; events go to `delegate` on this loop. `body` streams the request body.
    public func start(_ request: borrowing UpstreamRequest, body: RequestBody?, delegate: any UpstreamTransferDelegate)
        -> UpstreamTransfer
    {
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
        // Never the same libcurl handle for a second transfer (`EasyHandle.renew` says why). The
        // copy is made once this iteration's output has been written (its flushes are tasks of
        // the iteration's first round; this runs in a later one), off the response's path.
        let handle = transfer.handle
        guard EasyHandle.keepsFreedField else { return idleHandles.append(handle) }
        loop.afterEvents { [self] in
            loop.afterEvents { [self] in
                if handle.renew() { idleHandles.append(handle) }
            }
        }
    }

    // MARK: libcurl callbacks (they only record what to watch)

    func socketChanged(_ fd: curl_socket_t, _ what: Int32, by easy: UnsafeMutableRawPointer? = nil) {
        if what == CC_POLL_REMOVE {
            // A pooled connection between transfers: keep its registration (the next transfer
            // usually watches it the same way) and drop it only if it turns ready while parked.
            guard let socket = sockets[fd] else { return }
            socket.user = easy
            if case .watched(let interest) = socket.state {
                socket.park(interest)
                guard let tuning else {
                    // Untuned, libcurl's liveness check of a pooled connection is the kernel's,
                    // and it takes readable for alive: bytes already there (a response no request
                    // asked for, sent with the last one) or a reset spoil the connection now. Tuned,
                    // that check is answered from what the loop knows (`SocketReadiness.parked`).
                    if interest.contains(.read) && socket.established && Self.holdsUnread(fd) { socket.spoil() }
                    return
                }
                parked.add(socket, iteration: loop.iterations)
                // Bytes the tuning read ahead on a connection between transfers: no wait reports
                // them, so the reaper is called as a wait's report would; the tuning's checks find
                // the connection spoiled. A paused transfer's socket parks too: the reaper leaves
                // connections in use alone.
                if interest.contains(.read) && tuning.holdsBytes(for: fd) { deadConnectionSeen() }
            }
            return
        }
        var interest: Interest = []
        if what == CC_POLL_IN || what == CC_POLL_INOUT { interest.insert(.read) }
        if what == CC_POLL_OUT || what == CC_POLL_INOUT { interest.insert(.write) }
        guard let socket = sockets[fd] else {
            let socket = CurlSocket(fd: fd, client: self, opened: false)
            socket.user = easy
            sockets[fd] = socket
            return watch(socket, interest)
        }
        socket.user = easy
        switch socket.state {
        case .unregistered:
            watch(socket, interest)
        case .watched(let current) where current == interest:
            return
        case .parked(let current, _) where socket.established && current == interest:
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
        if interest.contains(.read) { socket.watchedForReading() }
        // Watched for reading again (a paused transfer resumed) with bytes the tuning read ahead:
        // no wait reports them, so they are run as a stalled pass's are.
        if interest.contains(.read), let tuning, tuning.holdsBytes(for: fd) { queueStalled() }
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
    func openSocket(_ address: UnsafeMutablePointer<curl_sockaddr>) -> curl_socket_t {
        let fd = Glibc.socket(
            address.pointee.family, address.pointee.socktype | Int32(SOCK_CLOEXEC.rawValue), address.pointee.protocol)
        guard fd >= 0 else { return CC_SOCKET_BAD }
        tuning?.opened(fd)
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
    func closeSocket(_ fd: curl_socket_t) -> Int32 {
        keepEarlyAnswer(fd)
        if let socket = sockets[fd] {
            socket.state = .unregistered
            loop.forget(fd: fd)
            sockets[fd] = nil
        }
        // Last, before the number can name another socket, perhaps another thread's.
        tuning?.closing(fd)
        return Glibc.close(fd)
    }

    /// curl closes `fd` holding unread bytes, and a transfer that went out on it awaits its head
    /// with a body to send: they may be the upstream's early answer, which libcurl did not read
    /// because a send failed first (`UpstreamTransfer.relayEarlyAnswer`). Up to
    /// `earlyAnswerLimit` of them are kept for the transfer. A socket closed with nothing to read,
    /// as almost every one is, costs one `recvfrom`.
    private func keepEarlyAnswer(_ fd: CInt) {
        var byte: UInt8 = 0
        guard recvfrom(fd, &byte, 1, CInt(MSG_PEEK | MSG_DONTWAIT), nil, nil) > 0 else { return }
        var address = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard named == 0, address.ss_family == sa_family_t(AF_INET) || address.ss_family == sa_family_t(AF_INET6) else {
            return
        }
        // The port is at the same place in `sockaddr_in` and `sockaddr_in6`, in network order.
        let port = withUnsafeBytes(of: &address) { Int($0[2]) << 8 | Int($0[3]) }
        // The local port alone can name two connections (to different upstreams): the transfer must
        // also be the one curl last watched this socket for.
        let user = sockets[fd]?.user
        guard
            let transfer = active.first(where: {
                $0.localPort == port && $0.awaitsEarlyAnswer && (user == nil || $0.handle.easy == user)
            })
        else { return }
        var answer = [UInt8](repeating: 0, count: UpstreamTransfer.earlyAnswerLimit)
        var count = 0
        // Whether a read found the connection's end (an EOF or a reset), not just no more bytes yet.
        var reachesEnd = false
        while count < answer.count {
            let got = answer.withUnsafeMutableBytes {
                recvfrom(fd, $0.baseAddress! + count, $0.count - count, CInt(MSG_DONTWAIT), nil, nil)
            }
            guard got > 0 else {
                reachesEnd = got == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
                break
            }
            count += got
        }
        if count == answer.count {
            // Full: the answer ends here only if nothing follows.
            let more = recvfrom(fd, &byte, 1, CInt(MSG_PEEK | MSG_DONTWAIT), nil, nil)
            reachesEnd = more == 0 || (more < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
        }
        answer.removeLast(answer.count - count)
        transfer.earlyAnswer = answer
        transfer.earlyAnswerReachesEnd = reachesEnd
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
    /// The client owns this and clears `client` in its `deinit`, so a queued call that runs later
    /// finds none.
    private final class Kick {
        var client: Unretained<UpstreamClient>?
    }

    /// Made once, so queueing it allocates nothing.
    private lazy var kickAction: () -> Void = { [kick] in kick.client?.object.kicked() }

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

    /// Made once, like `timeoutAction`, and unretained the same way: its timer is cancelled in `deinit`.
    private lazy var sweepAction: () -> Void = { [client = Unretained(self)] in client.object.sweepDeadlines() }

    /// Made once, so arming the timer allocates nothing. Unretained, and cancelled in `deinit`
    /// (the client is released on its loop's thread, or after the loop stopped): a weak
    /// reference would give the client a side table, and every retain of it, several per
    /// transfer, would take the slow path (bench/cost-profile.sh).
    private lazy var timeoutAction: () -> Void = { [client = Unretained(self)] in
        let client = client.object
        client.timer = nil
        client.timerDeadline = nil
        client.curlTimeoutDue()
    }

    // MARK: driving

    func socketAction(fd: CInt, events: Int32) {
        parked.promote(dispatched: loop.batchesDispatched)
        var running: Int32 = 0
        callbackDepth += 1
        // Any call may run a new transfer's connect step (curl runs due timeouts with socket
        // events too); the timeout call runs every one started before it.
        let starting = bodiesStarting
        runCurl(strict: starting > 0) { curl_multi_socket_action(multi, fd, events, &running) }
        if fd == CC_SOCKET_TIMEOUT { bodiesStarting -= starting }
        callbackDepth -= 1
        passEnded()
    }

    /// Resumes a paused direction of a transfer; libcurl may call back synchronously.
    func unpause(_ transfer: UpstreamTransfer, mask: Int32) {
        parked.promote(dispatched: loop.batchesDispatched)
        callbackDepth += 1
        runCurl(strict: false) { curl_easy_pause(transfer.handle.easy, mask) }
        callbackDepth -= 1
        passEnded()
    }

    private func passEnded() {
        if let tuning, tuning.stalled { queueStalled() }
        drainCompleted()
    }

    private func queueStalled() {
        guard !stalledQueued else { return }
        stalledQueued = true
        loop.runDue(stalledAction)
    }

    /// The last pass left bytes the tuning read ahead on a socket curl watches that no run of it
    /// read (`UpstreamTuning.stalled`). They are not in the kernel, so no wait reports them: after the
    /// loop's next wait (no longer than a poll: `runDue`), curl reads the socket again, as it
    /// would if a level-triggered wait reported bytes still in the kernel. That pass may leave
    /// them again; then the next turn tries again, as the wait would report them again.
    private func runStalled() {
        stalledQueued = false
        guard let tuning else { return }
        for fd in tuning.stalledSockets() where tuning.holdsBytes(for: fd) && watchesForReading(fd) {
            socketAction(fd: fd, events: CC_CSELECT_IN)
        }
    }

    /// Whether curl watches `fd` for reading (so the loop has it registered, level-triggered): a
    /// wait would report bytes in the kernel, and so must the bytes read ahead be. Spoiled or not:
    /// a paused transfer's socket parked and spoiled is watched again when it resumes.
    func watchesForReading(_ fd: CInt) -> Bool {
        guard case .watched(let interest) = sockets[fd]?.state else { return false }
        return interest.contains(.read)
    }

    /// A run of stalled sockets is queued (`runDue`).
    private var stalledQueued = false
    /// Made once, like `timeoutAction`; cancelled in effect by `deinit`'s `kick.client = nil`.
    private lazy var stalledAction: () -> Void = { [kick] in kick.client?.object.runStalled() }

    private func drainCompleted() {
        var remaining: Int32 = 0
        while let message = curl_multi_info_read(multi, &remaining) {
            guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle else { continue }
            if reaper?.finished(easy) == true { continue }
            var handlePointer: UnsafeMutableRawPointer?
            guard cc_info_ptr(easy, CURLINFO_PRIVATE, &handlePointer) == CURLE_OK, let handlePointer,
                let transfer = Unmanaged<EasyHandle>.fromOpaque(handlePointer).takeUnretainedValue().transfer,
                transfer.activeIndex >= 0
            else { continue }
            transfer.completed(code: cc_msg_result(message))
        }
    }
}
