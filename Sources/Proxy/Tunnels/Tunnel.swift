import EventLoop
import Glibc
import HTTP1
import HTTPServer
import Upstream

/// One upgraded exchange (a WebSocket): the upgrade request goes to the upstream over a libcurl
/// connect-only connection with the route's credentials; a `101` answer takes the client socket
/// from its HTTP connection and bytes move both ways until either side ends, the idle timeout,
/// or the credentials it carries are withdrawn (docs/websockets.md). Every lifecycle decision is
/// `TunnelStateMachine`'s. Each direction holds at most `TunnelTable.queueCap` bytes: past it the
/// sending side is not read (backpressure both ways).
final class Tunnel: ProxyExchangeDelegate {
    /// What a tunnel carries and whom it answers to, for withdrawal and the log.
    struct Identity {
        let requestID: String
        let route: String
        /// The request's path as routed (a reload after which it no longer routes to `route`
        /// closes the tunnel).
        let path: String
        /// The provider whose token the handshake carried; nil on a route without credentials.
        let provider: String?
        /// The generation of that token.
        let generation: UInt64
        /// The client address (per-client cap).
        let peer: String
        /// The `Upgrade` protocol (lowercased): a `websocket` tunnel says goodbye with a close frame.
        let upgrade: String
        /// The upstream's `host:port` and the route's upstream origin when it opened (a reload that
        /// moves the route closes the tunnel).
        let upstream: String
        let idleTimeout: Double
        /// Seconds the upstream's answer may take (the route's `timeoutSeconds`).
        let answerTimeout: Double
    }

    let identity: Identity
    /// The exchange's context (its access-log line is the tunnel's opening line), held until
    /// the exchange ended: an open tunnel keeps neither it nor the request head.
    private var heldContext: ExchangeContext?
    /// The exchange's context; read only while the exchange is under way (as its delegate).
    var context: ExchangeContext { heldContext! }
    private weak var table: TunnelTable?
    private let loop: EventLoop
    private var exchange: HTTPExchange?
    private var machine = TunnelStateMachine()
    private var link: UpstreamTunnel?
    /// The handshake, then bytes from the client, toward the upstream.
    private var toUpstream = TunnelQueue()
    /// The 101 head and bytes from the upstream, toward the client.
    private var toClient = TunnelQueue()
    /// The answer head being read (until its blank line).
    private var answer: [UInt8] = []
    /// A refused upgrade's answer, read whole before it is relayed.
    private var refusal: TunnelAnswer.Refusal?
    /// Masks the route's token where the upstream's answer (a 101's head, a refusal) echoes it
    /// (nil: masking is off, or the route carries no token).
    private var answerMasker: EchoMasker?
    private var clientFD: CInt = -1
    private var clientEnd: TunnelEnd?
    private var upstreamEnd: TunnelEnd?
    private var clientInterest: Interest = []
    private var upstreamInterest: Interest = []
    private let openedAt: NanoTime
    private var lastActivity: NanoTime
    private var timer: TimerID?
    /// When the armed timer fires.
    private var timerDeadline: NanoTime?
    private var drainDeadline: NanoTime?
    /// When the upstream's answer is due (from the handshake's sending).
    private var answerDeadline: NanoTime?
    /// Whether the upstream answered the handshake (a 101 or a refusal): the console notes the
    /// exchange as credentialed and forwarded then.
    private(set) var upstreamAnswered = false
    private(set) var bytesUp = 0
    private(set) var bytesDown = 0
    /// Frame boundaries of a WebSocket's bytes toward the client (nil for another protocol, which
    /// gets no close frame): the goodbye goes in between frames.
    private var framing: WebSocketFrameCursor?

    /// How long a drain toward a side that does not read may take (but at shutdown: the grace).
    static let drainSeconds = 5.0
    /// How long the goodbye to the client may take (`withdraw`).
    private var goodbyeSeconds = Tunnel.drainSeconds
    /// A WebSocket close frame, status 1001 "going away" (RFC 6455 §5.5.1, §7.4.1): sent to the
    /// client when the proxy ends the tunnel.
    private static let goingAway: [UInt8] = [0x88, 0x02, 0x03, 0xE9]

    init(
        context: ExchangeContext, identity: Identity, handshake: [UInt8], table: TunnelTable,
        answerMasker: EchoMasker? = nil
    ) {
        let exchange = context.exchange
        self.answerMasker = answerMasker
        self.exchange = exchange
        heldContext = context
        self.identity = identity
        self.table = table
        loop = exchange.loop
        openedAt = loop.now
        lastActivity = openedAt
        toUpstream.append(handshake)
        if identity.upgrade == "websocket" { framing = WebSocketFrameCursor() }
    }

    /// Starts the upstream connect (`origin`: the route's upstream origin; `tls`: its TLS settings).
    func start(origin: String, tls: UpstreamTLS?, connector: TunnelConnector, connectTimeout: Double) {
        exchange?.delegate = self
        link = connector.connect(origin: origin, connectTimeout: connectTimeout, tls: tls) { [weak self] error in
            guard let self else { return }
            if let error { return self.perform(self.machine.connectFailed(error.description, loop: error.isLoop)) }
            self.perform(self.machine.connected())
        }
    }

    /// Withdraws the tunnel (logout, a replaced token, a reload moving its route, shutdown), with
    /// `seconds` to say goodbye to the client.
    func withdraw(_ reason: String, within seconds: Double = Tunnel.drainSeconds) {
        goodbyeSeconds = seconds
        perform(machine.withdraw(reason, atBoundary: framing?.atBoundary ?? true))
    }

    var isClosed: Bool { machine.isClosed }

    // MARK: exchange events (before the hand-over)

    func exchange(_ exchange: HTTPExchange, finished outcome: ExchangeOutcome) {
        if let heldContext { table?.handler?.exchangeFinished(heldContext, outcome: outcome, forwarded: nil) }
        heldContext = nil
        // Answered (refused, failed) or handed over: nothing to do. A client gone first ends the tunnel.
        guard self.exchange === exchange else { return }
        self.exchange = nil
        perform(machine.ended(.client))
    }

    // MARK: actions

    private func perform(_ action: TunnelStateMachine.Action) {
        switch action {
        case .none:
            break
        case .sendHandshake:
            answerDeadline = loop.now.adding(seconds: identity.answerTimeout)
            syncTimer()
            watchUpstream()
            pushUpstream()
        case .readRefusal:
            refusal = TunnelAnswer.Refusal(answer)
            answer = []
            updateInterest()
            if let link, let table { readRefusal(link, table) }
        case .relayAnswer:
            relayAnswer()
        case .fail(let failure):
            let error: ProxyError =
                switch failure {
                case .unreachable: .upstreamUnreachable
                case .invalidAnswer: .upstreamUnreachable
                case .loop: .loopDetected
                case .timeout: .upstreamTimeout
                case .withdrawn(let reason): .tunnelClosed(reason)
                }
            if case .unreachable(let message) = failure {
                table?.handler?.log.emit(
                    .warning, "upstream_failed",
                    [
                        ("requestID", .string(identity.requestID)),
                        ("route", .string(identity.route)),
                        ("error", .string(message)),
                    ])
            }
            if exchange != nil, let heldContext, let handler = table?.handler { handler.fail(heldContext, error) }
            finish()
        case .openBridge:
            openBridge()
        case .relay:
            table?.opened(self)
            syncTimer()
            pushBoth()
        case .finishFrame:
            drainDeadline = loop.now.adding(seconds: goodbyeSeconds)
            syncTimer()
            updateInterest()
            readUpstream()
        case .drain:
            drainDeadline = loop.now.adding(seconds: Self.drainSeconds)
            syncTimer()
            updateInterest()
            pushBoth()
        case .sayGoodbye:
            // After a finished frame the deadline is the one its wait began with.
            drainDeadline = drainDeadline ?? loop.now.adding(seconds: goodbyeSeconds)
            syncTimer()
            if framing != nil { toClient.append(Self.goingAway) }
            updateInterest()
            pushClient()
        case .close:
            finish()
        }
    }

    /// The 101 came: the client socket is taken over, with the bytes the client already sent
    /// queued to go up; then the machine opens the tunnel (`relay`).
    private func openBridge() {
        // Forgotten first: the hand-over finishes the exchange, which must not read as the client leaving.
        guard let exchange else { return perform(machine.failed("client_closed")) }
        self.exchange = nil
        guard let socket = exchange.handOver() else { return perform(machine.failed("client_closed")) }
        clientFD = socket.fd
        let end = TunnelEnd(tunnel: self, side: .client)
        clientEnd = end
        do { try loop.claim(fd: clientFD, interest: .read, target: end) } catch {
            return perform(machine.failed("epoll_error"))
        }
        clientInterest = .read
        if !socket.early.isEmpty { toUpstream.append(socket.early) }
        perform(machine.bridged())
    }

    // MARK: readiness

    /// Readiness that a read answers: input, the peer's FIN, a hang-up (`EPOLLHUP`, 0x10) or an
    /// error (`EPOLLERR`, 0x08), so an end or a failure is seen by the read that follows.
    private static let readableEvents: UInt32 = Interest.read.rawValue | 0x10 | 0x08

    /// A hang-up (`EPOLLHUP`) or an error (`EPOLLERR`): the kernel reports them whatever the interest.
    private static let hangUpEvents: UInt32 = 0x10 | 0x08

    func ready(_ side: TunnelStateMachine.Side, _ events: UInt32) {
        switch side {
        case .client:
            if events & Interest.write.rawValue != 0 { pushClient() }
            if events & Self.readableEvents != 0 { readClient() }
        case .upstream:
            if events & Interest.write.rawValue != 0 { pushUpstream() }
            if events & Self.readableEvents != 0 { readUpstream() }
        }
        if events & Self.hangUpEvents != 0 { hungUp(side) }
    }

    /// `side` hung up or failed while it is not read (its queue toward the other side is full, or
    /// the tunnel is ending): the loop would report it again at once, for ever, so it is no longer
    /// watched, and the machine hears that it ended (what is queued toward the other side is still
    /// written). A side that is read sees the end in the read that just ran.
    private func hungUp(_ side: TunnelStateMachine.Side) {
        guard !machine.isClosed else { return }
        switch side {
        case .client:
            guard clientFD >= 0, clientEnd != nil, !clientInterest.contains(.read) else { return }
            loop.deregister(fd: clientFD)
            clientEnd = nil
        case .upstream:
            guard let link, link.fd >= 0, upstreamEnd != nil, !upstreamInterest.contains(.read) else { return }
            loop.deregister(fd: link.fd)
            upstreamEnd = nil
        }
        perform(machine.ended(side))
    }

    private func readClient() {
        guard machine.isOpen, clientFD >= 0, let table else { return }
        while toUpstream.count < TunnelTable.queueCap {
            let n = table.scratch.withUnsafeMutableBytes { Glibc.read(clientFD, $0.baseAddress, $0.count) }
            if n > 0 {
                table.scratch.withUnsafeBytes { toUpstream.append(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
                bytesUp += n
                lastActivity = loop.now
                continue
            }
            if n == 0 { return perform(machine.ended(.client)) }
            if errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR { break }
            return perform(machine.failed("client_read_error"))
        }
        pushUpstream()
    }

    private func readUpstream() {
        guard let link, let table else { return }
        switch machine.state {
        case .handshaking: return readAnswer(link, table)
        case .refused: return readRefusal(link, table)
        case .open, .finishingFrame: break
        default: return
        }
        // Before a goodbye only the rest of the frame under way is taken (what follows it is not
        // delivered: the tunnel is closing).
        let finishing = !machine.isOpen
        while toClient.count < TunnelTable.queueCap {
            let step = table.scratch.withUnsafeMutableBytes { link.receive(into: $0) }
            switch step {
            case .moved(0):
                return perform(machine.ended(.upstream))
            case .moved(let n):
                let taken = table.scratch.withUnsafeBytes { scratch in
                    let chunk = UnsafeRawBufferPointer(rebasing: scratch[0..<n])
                    let taken = framing?.advance(over: chunk, stopAtBoundary: finishing) ?? n
                    toClient.append(UnsafeRawBufferPointer(rebasing: chunk[0..<taken]))
                    return taken
                }
                bytesDown += taken
                lastActivity = loop.now
                if finishing, framing?.atBoundary ?? true { return perform(machine.frameFinished()) }
            case .again:
                return pushClient()
            case .failed:
                return perform(machine.failed("upstream_read_error"))
            }
        }
        pushClient()
    }

    /// Reads the upstream's answer head; a 101 opens the bridge with the bytes after it queued
    /// for the client.
    private func readAnswer(_ link: UpstreamTunnel, _ table: TunnelTable) {
        while true {
            let step = table.scratch.withUnsafeMutableBytes { link.receive(into: $0) }
            switch step {
            case .moved(0):
                return perform(machine.answerInvalid())
            case .moved(let n):
                table.scratch.withUnsafeBytes { answer.append(contentsOf: $0[0..<n]) }
                TunnelAnswer.droppingInterim(&answer)
                if let end = TunnelAnswer.headEnd(answer) {
                    guard let status = TunnelAnswer.status(answer) else { return perform(machine.answerInvalid()) }
                    upstreamAnswered = true
                    if status == 101 {
                        toClient.append(maskingEchoes(answer[..<end]))
                        toClient.append(Array(answer[end...]))
                        framing?.advance(over: answer[end...])
                        bytesDown += answer.count - end
                        answer = []
                    }
                    return perform(machine.answered(status: status))
                }
                if answer.count > TunnelAnswer.maxHead { return perform(machine.answerInvalid()) }
            case .again:
                return
            case .failed:
                return perform(machine.answerInvalid())
            }
        }
    }

    /// A 101's head as it came, but for the route's token where it echoes it (a field name in any
    /// case, or a value), as in any response (docs/security.md, "Echoed credentials").
    private func maskingEchoes(_ head: ArraySlice<UInt8>) -> [UInt8] {
        guard var masker = answerMasker else { return Array(head) }
        var head = Array(head)
        if let masked = masker.masking(head[...]) { head = masked }
        if let masked = masker.maskingIgnoringCase(head[...]) { head = masked }
        return head
    }

    /// Reads a refused upgrade's body as far as it came; the rest arrives with the socket's readiness.
    private func readRefusal(_ link: UpstreamTunnel, _ table: TunnelTable) {
        while refusal?.isComplete == false {
            let step = table.scratch.withUnsafeMutableBytes { link.receive(into: $0) }
            switch step {
            case .moved(0), .failed: refusal?.upstreamEnded()
            case .moved(let n):
                table.scratch.withUnsafeBytes { refusal?.append(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
            case .again: return
            }
        }
        perform(machine.refusalRead())
    }

    /// Relays a refused upgrade (any status but 101) as the request's answer: its head fields
    /// (hop-by-hop ones dropped) and its body.
    private func relayAnswer() {
        if let refusal, exchange != nil, let heldContext, let handler = table?.handler {
            var headers = refusal.headers
            var body = refusal.body
            if var masker = answerMasker {
                // An upstream that echoes the handshake in its refusal gets the token masked, as
                // any response does (docs/security.md, "Echoed credentials").
                for index in headers.indices {
                    if let masked = masker.masking(ArraySlice(headers[index].value.utf8)) {
                        headers[index].value = String(decoding: masked, as: UTF8.self)
                    }
                }
                if let masked = masker.masking(body[...]) { body = masked }
            }
            handler.send(heldContext, status: refusal.status, headers: headers, body: body)
        }
        refusal = nil
        finish()
    }

    // MARK: output

    private func pushBoth() {
        pushUpstream()
        pushClient()
    }

    private func pushUpstream() {
        guard let link, !toUpstream.isEmpty else { return afterPush() }
        while !toUpstream.isEmpty {
            let step = toUpstream.withReadable { link.send($0) }
            switch step {
            case .moved(0), .again:
                return afterPush()
            case .moved(let n):
                toUpstream.consume(n)
            case .failed:
                return perform(machine.failed("upstream_write_error"))
            }
        }
        afterPush()
    }

    private func pushClient() {
        guard clientFD >= 0 else { return afterPush() }
        let wasFull = toClient.count >= TunnelTable.queueCap
        while !toClient.isEmpty {
            let n = toClient.withReadable { Glibc.write(clientFD, $0.baseAddress, $0.count) }
            if n > 0 {
                toClient.consume(n)
                continue
            }
            if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) { break }
            return perform(machine.ended(.client))
        }
        afterPush()
        // Room again toward the client: TLS may hold decrypted bytes no readiness reports.
        if wasFull, toClient.count < TunnelTable.queueCap, machine.readsUpstream {
            loop.afterEvents { [weak self] in self?.readUpstream() }
        }
    }

    /// After output moved: a drain that emptied its queue closes; the interests follow the queues.
    private func afterPush() {
        if case .draining(_, let toward) = machine.state {
            let queue = toward == .client ? toClient : toUpstream
            if queue.isEmpty { return perform(machine.drained()) }
        }
        updateInterest()
    }

    private func watchUpstream() {
        guard let link, link.fd >= 0 else { return perform(machine.failed("upstream_unreachable")) }
        let end = TunnelEnd(tunnel: self, side: .upstream)
        upstreamEnd = end
        do { try loop.claim(fd: link.fd, interest: [.read, .write], target: end) } catch {
            return perform(machine.failed("epoll_error"))
        }
        upstreamInterest = [.read, .write]
    }

    private func updateInterest() {
        if machine.isClosed { return }
        let open = machine.isOpen
        if let link, link.fd >= 0, upstreamEnd != nil {
            var wanted: Interest = []
            if machine.state == .handshaking || machine.state == .refused
                || (machine.readsUpstream && toClient.count < TunnelTable.queueCap)
            {
                wanted.insert(.read)
            }
            if !toUpstream.isEmpty { wanted.insert(.write) }
            if wanted != upstreamInterest {
                upstreamInterest = wanted
                do { try loop.reregister(fd: link.fd, interest: wanted) } catch {
                    return perform(machine.failed("epoll_error"))
                }
            }
        }
        if clientFD >= 0, clientEnd != nil {
            var wanted: Interest = []
            if open && toUpstream.count < TunnelTable.queueCap { wanted.insert(.read) }
            if !toClient.isEmpty { wanted.insert(.write) }
            if wanted != clientInterest {
                clientInterest = wanted
                do { try loop.reregister(fd: clientFD, interest: wanted) } catch {
                    return perform(machine.failed("epoll_error"))
                }
            }
        }
    }

    // MARK: timer and closing

    /// One timer: the answer's deadline while it is awaited, the idle deadline while open, the
    /// drain deadline while draining.
    private var deadline: NanoTime? {
        switch machine.state {
        case .handshaking, .refused: answerDeadline
        case .open: lastActivity.adding(seconds: identity.idleTimeout)
        case .finishingFrame, .draining: drainDeadline
        default: nil
        }
    }

    /// Keeps one timer, armed no later than `deadline`: a later deadline (bytes moved) is
    /// rechecked when it fires, an earlier one (a drain began) replaces it.
    private func syncTimer() {
        guard let deadline else { return }
        if let timer, let timerDeadline {
            guard deadline < timerDeadline else { return }
            loop.cancel(timer)
        }
        timerDeadline = deadline
        timer = loop.schedule(at: deadline) { [weak self] in
            guard let self else { return }
            self.timer = nil
            self.timerDeadline = nil
            self.timerFired()
        }
    }

    private func timerFired() {
        guard let deadline else { return }
        if deadline > loop.now { return syncTimer() }
        switch machine.state {
        case .handshaking, .refused: perform(machine.answerTimedOut())
        case .open: withdraw("idle_timeout")
        // A frame not finished in time: the client's connection closes without a close frame.
        case .finishingFrame, .draining: perform(machine.failed("drain_timeout"))
        default: break
        }
    }

    /// Releases both sides; the table logs the close and counts it.
    private func finish() {
        if let timer { loop.cancel(timer) }
        timer = nil
        if clientFD >= 0 {
            loop.deregister(fd: clientFD)
            closeDescriptor(clientFD)
            clientFD = -1
        }
        if let link {
            if link.fd >= 0, upstreamEnd != nil { loop.deregister(fd: link.fd) }
            link.close()
        }
        link = nil
        clientEnd = nil
        upstreamEnd = nil
        toClient = TunnelQueue()
        toUpstream = TunnelQueue()
        let reason: String = if case .closed(let reason, _) = machine.state { reason } else { "closed" }
        table?.closed(
            self, reason: reason, opened: machine.opened,
            seconds: Double(loop.now.nanoseconds - openedAt.nanoseconds) / 1e9)
    }
}

/// One side's registration with the loop: the loop's target for that descriptor.
final class TunnelEnd: Selectable {
    private weak var tunnel: Tunnel?
    private let side: TunnelStateMachine.Side

    init(tunnel: Tunnel, side: TunnelStateMachine.Side) {
        self.tunnel = tunnel
        self.side = side
    }

    func ready(_ events: UInt32) { tunnel?.ready(side, events) }
}
