import CLinux
import EventLoop
import Glibc
import HTTP1

/// One client connection on one loop: reads, parses, hands exchanges to the handler,
/// writes responses in order. Every lifecycle decision is `ConnectionStateMachine`'s; this class
/// performs the actions it returns (read, write, arm the timer, close) and nothing else.
final class HTTPConnection: Selectable {
    let fd: CInt
    let peer: String
    /// Index of the listener address it was accepted on.
    let listener: Int
    private let loop: EventLoop
    /// The loop's server, not retained. Who keeps it alive: the `HTTPServer`, which holds every
    /// loop's server for its own lifetime, past the loops' stop. The server holds this connection
    /// in its table until `connectionClosed`, so it outlives every use here (a closed connection
    /// the loop still holds touches it no more). A retained or checked reference would cost
    /// atomics several times per request (`bench/cost-profile.sh` counts swift_retain).
    private let owner: Unretained<LoopServer>
    private var machine: ConnectionStateMachine
    private var parser: HTTPRequestHeadParser
    private var decoder = HTTPBodyDecoder(framing: .none)
    private let input: ByteBuffer
    private let output: ByteBuffer
    private let inputLimit: Int
    private var exchange: HTTPExchange?
    private var interest: Interest = .read
    private var timer: TimerID?
    private var timerDeadline = NanoTime(nanoseconds: .max)
    /// Re-entrancy guards of the I/O (not lifecycle): inside `ready`, output is flushed when it
    /// returns; inside `process`, a nested request to parse is left to the running loop; a flush
    /// already scheduled for the end of the loop iteration is not scheduled twice.
    private var inReady = false
    private var processing = false
    private var flushScheduled = false
    /// Bytes written to the socket so far, and the count at which the current response begins:
    /// while the first is not past the second, no byte of that response has left.
    private var writtenTotal = 0
    private var responseStart = 0
    /// Made once per connection (`start`), so scheduling a flush or the timer allocates nothing
    /// per response. They hold the connection strongly: a weak reference would give it a side
    /// table, and every retain of it would take the slow path (`bench/cost-profile.sh` shows it
    /// as swift_retain's side-table path). `performClose` drops them; a copy the loop still holds
    /// keeps the connection alive until it ran, and finds it closed.
    private var flushAction: (() -> Void)?
    private var timerAction: (() -> Void)?

    private static let highWater = 256 * 1024
    private static let lowWater = 64 * 1024
    private static let continueLine = StaticBytes("HTTP/1.1 100 Continue\r\n\r\n")

    init(fd: CInt, peer: String, listener: Int, loop: EventLoop, owner: LoopServer) {
        self.fd = fd
        self.peer = peer
        self.listener = listener
        self.loop = loop
        self.owner = Unretained(owner)
        let limits = owner.configuration
        machine = ConnectionStateMachine(
            now: loop.now, headerTimeout: limits.headerTimeout, idleTimeout: limits.idleTimeout)
        parser = HTTPRequestHeadParser(
            limits: HTTPHeadLimits(maxHeadBytes: limits.maxHeadBytes, maxHeaderCount: limits.maxHeaderCount))
        inputLimit = max(limits.maxHeadBytes + 4096, 65536)
        input = ByteBuffer(pool: owner.inputBuffers)
        output = ByteBuffer(pool: owner.outputBuffers)
    }

    func start() throws(IOError) {
        try loop.register(fd: fd, interest: .read, target: self)
        flushAction = { [self] in
            flushScheduled = false
            flush()
        }
        timerAction = { [self] in timerFired() }
        syncTimer()
    }

    /// Whether more output may be queued (less than `limit` is, by default the high-water mark);
    /// a refusal is remembered, and the exchange's delegate hears `exchangeWritable` once the
    /// buffer drained below the low-water mark.
    func canWrite(_ exchange: HTTPExchange, below limit: Int = HTTPConnection.highWater) -> Bool {
        if output.readableBytes < limit { return true }
        if exchange === self.exchange { machine.writerRefused() }
        return false
    }

    /// Bytes queued that the socket has not taken yet.
    var queuedBytes: Int { output.readableBytes }

    // MARK: readiness

    func ready(_ events: UInt32) {
        inReady = true
        if events & EPOLLOUT.rawValue != 0 { flush() }
        if events & (EPOLLIN.rawValue | EPOLLRDHUP.rawValue | EPOLLHUP.rawValue | EPOLLERR.rawValue) != 0 {
            readAndProcess()
        }
        inReady = false
        flush()
        // Between requests a keep-alive connection holds no buffer (the pool has it).
        input.releaseIfEmpty(unpooledSize: 8192)
    }

    private func readAndProcess() {
        // The descriptor is gone once the machine closed (a write error in this very event).
        if machine.isGone { return }
        let space = input.writableSpace(minimum: 4096, limit: inputLimit)
        guard space.count > 0 else { updateInterest(); return }
        let result: IOResult<Int>
        do {
            result = try syscall(blocking: false, where: "read") { Glibc.read(fd, space.baseAddress, space.count) }
        } catch {
            return close(reason: "read_error")
        }
        guard case .processed(let n) = result else { return }
        if n == 0 {
            process()
            return perform(machine.inputEnded())
        }
        input.didWrite(n)
        process()
    }

    /// Parses heads and body bytes from the input buffer as far as the state allows.
    private func process() {
        guard !processing else { return }
        processing = true
        defer { processing = false }
        while true {
            switch machine.reading {
            case .head:
                guard !input.isEmpty else { return syncTimer() }
                switch parser.parse(input.readable) {
                case .incomplete:
                    perform(machine.headBytesReceived(now: loop.now))
                    return syncTimer()
                case .invalid(let error):
                    perform(machine.headBytesReceived(now: loop.now))
                    return refuse(HTTPRefusal(error))
                case .complete(let head, let consumed):
                    input.consume(consumed)
                    parser.reset()
                    startExchange(head)
                }
            case .body:
                // A finished decoder still owes its end event, even with nothing left to read.
                guard !input.isEmpty || decoder.isComplete else { return syncTimer() }
                decodeBody()
            case .nothing:
                return syncTimer()
            case .closed:
                return
            }
        }
    }

    /// The head is moved into the exchange, not copied (a copy retains its two arrays).
    private func startExchange(_ head: consuming HTTPRequestHead) {
        let now = loop.now
        let framing = head.framing
        let action = machine.headReceived(
            now: now, keepAlive: head.keepAlive, hasBody: framing != .none,
            expectsContinue: head.expectsContinue)
        let exchange = HTTPExchange(
            head: head, peer: peer, listener: listener, startedAt: now, loop: loop, connection: self)
        self.exchange = exchange
        decoder = HTTPBodyDecoder(framing: framing)
        perform(action)
        if case .length(let n) = framing, n > owner.object.configuration.maxBodyBytes {
            return refuse(.bodyTooLarge)
        }
        owner.object.handler.handle(exchange)
        // Closing drops the exchange, as does an answer that already let the next request in.
        guard self.exchange === exchange else { return }
        perform(machine.handlerReturned())
        if framing == .none && !exchange.isFinished { exchange.delegate?.exchangeBodyEnded(exchange) }
    }

    private func decodeBody() {
        let (consumed, event) = decoder.decode(input.readable)
        switch event {
        case .data(let range):
            if let exchange {
                exchange.bytesReceived += range.count
                if exchange.bytesReceived > owner.object.configuration.maxBodyBytes {
                    input.consume(consumed)
                    return refuse(.bodyTooLarge)
                }
            }
            if case .deliverBody = machine.bodyReceived(now: loop.now), let exchange, let delegate = exchange.delegate {
                delegate.exchange(exchange, receivedBody: UnsafeRawBufferPointer(rebasing: input.readable[range]))
            }
            input.consume(consumed)
        case .needMore:
            input.consume(consumed)
        case .end:
            input.consume(consumed)
            perform(machine.bodyEnded(now: loop.now))
        case .invalid(let error):
            input.consume(consumed)
            refuse(HTTPRefusal(error))
        }
    }

    // MARK: responses

    /// Answers with the handler's rendering of `refusal` and closes: the request cannot be trusted further.
    private func refuse(_ refusal: HTTPRefusal) {
        if let exchange, exchange.responseStarted {
            // Too late to answer: what was queued is dropped with the connection.
            return close(reason: refusal.code)
        }
        let action = machine.closeAfterFlush(reason: nil)
        output.append(owner.object.handler.refusal(refusal, exchange: exchange, peer: peer))
        if let exchange {
            exchange.progress = .ended
            exchange.status = refusal.status
            exchange.finish(.refused(refusal.reason), handler: owner.object.handler)
        }
        perform(action)
    }

    func respond(
        _ exchange: HTTPExchange, status: Int, headers: [(name: String, value: String)], body: UnsafeRawBufferPointer
    ) {
        writeHead(
            exchange, status: status, framing: exchange.isHeadRequest ? .bodiless : .length(body.count),
            field: .contentLength(body.count)
        ) { head in
            for (name, value) in headers { head.writeField(name, value) }
        }
        if !exchange.isHeadRequest { output.append(body) }
        exchange.bytesSent = body.count
        endResponse(exchange)
    }

    func startResponse(
        _ exchange: HTTPExchange, status: Int, framing: HTTPExchange.ResponseFraming,
        writeFields: (inout ResponseHeadWriter) -> Void
    ) {
        let isHead = exchange.isHeadRequest
        switch framing {
        case .length(let length):
            writeHead(
                exchange, status: status, framing: isHead ? .bodiless : .length(length),
                field: .contentLength(length), writeFields)
        case .bodiless:
            writeHead(exchange, status: status, framing: .bodiless, field: .none, writeFields)
        case .streamed where exchange.head.version == .http11:
            writeHead(
                exchange, status: status, framing: isHead ? .bodiless : .chunked,
                field: isHead ? .none : .chunked, writeFields)
        case .streamed:
            writeHead(
                exchange, status: status, framing: isHead ? .bodiless : .closeDelimited, field: .none, writeFields)
        }
        if case .started(.bodiless) = exchange.progress { return writeCompletedResponse() }
        if case .started(.length(0)) = exchange.progress { return writeCompletedResponse() }
        scheduleFlush()
    }

    func writeBody(_ exchange: HTTPExchange, _ bytes: UnsafeRawBufferPointer) {
        guard bytes.count > 0, case .started(let framing) = exchange.progress else { return }
        switch framing {
        case .bodiless, .overran:
            return
        case .length(let declared) where exchange.bytesSent + bytes.count > declared:
            // More body than the Content-Length sent: the rest would be read as another response.
            let allowed = max(0, declared - exchange.bytesSent)
            output.append(UnsafeRawBufferPointer(rebasing: bytes[0..<allowed]))
            exchange.bytesSent += allowed
            exchange.progress = .started(.overran)
        case .length(let declared):
            output.append(bytes)
            exchange.bytesSent += bytes.count
            if exchange.bytesSent == declared { return writeCompletedResponse() }
        case .closeDelimited:
            output.append(bytes)
            exchange.bytesSent += bytes.count
        case .chunked:
            var sizeLine = ResponseHeadWriter(output: output)
            sizeLine.writeHexadecimal(bytes.count)
            sizeLine.write(HTTPFieldSyntax.crlf)
            output.append(bytes)
            output.append(HTTPFieldSyntax.crlf)
            exchange.bytesSent += bytes.count
        }
        scheduleFlush()
    }

    func endResponse(_ exchange: HTTPExchange) {
        guard case .started(let framing) = exchange.progress else { return }
        if framing == .chunked { output.append(Self.lastChunk) }
        exchange.progress = .ended
        let action = machine.responseEnded(now: loop.now)
        exchange.finish(framing == .overran ? .truncated : .completed, handler: owner.object.handler)
        perform(action)
        scheduleFlush()
    }

    private static let lastChunk = StaticBytes("0\r\n\r\n")

    /// The framing field a response head ends with.
    private enum FramingField {
        case none
        case contentLength(Int)
        case chunked
    }

    /// Serialises a response head straight into the output buffer (no array to build it in and
    /// copy from: `ByteSink`).
    private func writeHead(
        _ exchange: HTTPExchange, status: Int, framing: HTTPExchange.BodyFraming, field: FramingField,
        _ writeFields: (inout ResponseHeadWriter) -> Void
    ) {
        exchange.progress = .started(framing)
        exchange.status = status
        let persistence = machine.responseStarted(closeDelimited: framing == .closeDelimited)
        responseStart = writtenTotal + output.readableBytes
        var head = ResponseHeadWriter(output: output)
        HTTPResponseHead.appendStatusLine(status, to: &head)
        writeFields(&head)
        switch field {
        case .none: break
        case .contentLength(let length):
            head.write(Self.contentLengthName)
            head.writeDecimal(length)
            head.write(HTTPFieldSyntax.crlf)
        case .chunked: head.write(Self.chunkedField)
        }
        if persistence == .close {
            head.write(Self.connectionClose)
        } else if exchange.head.version == .http10 {
            // HTTP/1.0 closes unless told otherwise (RFC 9112 §9.3): the client asked to keep
            // the connection, and this says it is kept.
            head.write(Self.connectionKeepAlive)
        }
        head.write(HTTPFieldSyntax.crlf)
    }

    private static let contentLengthName = StaticBytes("Content-Length: ")
    private static let chunkedField = StaticBytes("Transfer-Encoding: chunked\r\n")
    private static let connectionClose = StaticBytes("Connection: close\r\n")
    private static let connectionKeepAlive = StaticBytes("Connection: keep-alive\r\n")

    /// Performs what the machine decided.
    private func perform(_ action: ConnectionStateMachine.Action) {
        switch action {
        case .none:
            break
        case .armTimer:
            syncTimer()
        case .deliverBody:
            // Handed over where the bytes are decoded (`decodeBody`): only there are they in reach.
            break
        case .deliverBodyEnd:
            if let exchange { exchange.delegate?.exchangeBodyEnded(exchange) }
        case .resumeBody:
            // Inside the connection's own event the running loop parses on.
            guard !inReady else { return }
            process()
            scheduleFlush()
        case .dropResponse:
            output.truncate(keeping: responseStart - writtenTotal)
        case .readNextRequest:
            exchange?.connection = nil
            exchange = nil
            decoder = HTTPBodyDecoder(framing: .none)
            if !processing { process() }
        case .sendContinue:
            output.append(Self.continueLine)
        case .notifyWritable:
            if let exchange { exchange.delegate?.exchangeWritable(exchange) }
        case .flushAndClose:
            // Closed by `flush` once the output is empty (at the end of this event or iteration).
            updateInterest()
            scheduleFlush()
        case .close(let reason):
            performClose(reason: reason)
        case .handOver:
            // Performed by `handOver`, which asked for it and takes the socket.
            break
        }
    }

    func setBodyFlow(_ exchange: HTTPExchange, _ flow: ConnectionStateMachine.BodyFlow) {
        guard exchange === self.exchange else { return }
        perform(machine.setBodyFlow(flow))
    }

    /// The response's last byte is queued (head and body, one segment). When a lone event woke
    /// the loop (low load), it is written now, not at the end of the iteration, so the client has
    /// it while the exchange's completion runs (libcurl's bookkeeping, the access log, the
    /// metrics): c=1 latency. Under load the end of the iteration comes soon anyway, and writing
    /// there keeps batches large (writing at once costs more CPU per request at high concurrency:
    /// `bench/proxy.sh`). Only the write is done here, since it may run inside a libcurl callback:
    /// an error, a short write or EAGAIN is left to the scheduled flush, which acts on it outside
    /// any callback.
    private func writeCompletedResponse() {
        defer { scheduleFlush() }
        guard loop.eventsInBatch <= 1, !inReady, !output.isEmpty else { return }
        if machine.isGone { return }
        let readable = output.readable
        let written = Glibc.write(fd, readable.baseAddress, readable.count)
        guard written > 0 else { return }
        output.consume(written)
        writtenTotal += written
    }

    /// Output queued outside this connection's own event (an upstream callback, a timer) is
    /// written once at the end of the loop iteration: head and body leave in one segment, and no
    /// write error can close the connection from inside a libcurl callback.
    private func scheduleFlush() {
        // `performClose` drops `flushAction`: nothing is scheduled for a closed connection.
        guard !inReady, !flushScheduled, let flushAction else { return }
        flushScheduled = true
        loop.afterEvents(flushAction)
    }

    // MARK: output

    /// Writes what is queued as far as the socket takes it (nothing once the descriptor is closed).
    private func flush() {
        if machine.isGone { return }
        while !output.isEmpty {
            let readable = output.readable
            let result: IOResult<Int>
            do {
                result = try syscall(blocking: false, where: "write") {
                    Glibc.write(fd, readable.baseAddress, readable.count)
                }
            } catch {
                return close(reason: "write_error")
            }
            guard case .processed(let n) = result else { break }
            output.consume(n)
            writtenTotal += n
        }
        if output.isEmpty {
            output.releaseIfEmpty(unpooledSize: 16384)
            perform(machine.outputDrained(empty: true))
        } else {
            perform(machine.outputBlocked(now: loop.now))
            if output.readableBytes < Self.lowWater { perform(machine.outputDrained(empty: false)) }
        }
        if machine.isGone { return }
        syncTimer()
        updateInterest()
    }

    private func updateInterest() {
        var wanted: Interest = []
        switch machine.readInterest {
        case .read: wanted = .read
        case .readUnlessFull: if input.readableBytes < inputLimit { wanted = .read }
        case .none: if machine.isGone { return }
        }
        if !output.isEmpty { wanted.insert(.write) }
        guard wanted != interest else { return }
        interest = wanted
        do { try loop.reregister(fd: fd, interest: wanted) } catch { close(reason: "epoll_error") }
    }

    // MARK: timers and closing

    /// Keeps one timer per connection: extended deadlines are rechecked when it fires, an
    /// earlier deadline replaces it.
    private func syncTimer() {
        // `performClose` drops `timerAction`: no timer is armed for a closed connection.
        guard let deadline = machine.deadline, let timerAction else { return }
        if let timer {
            guard deadline < timerDeadline else { return }
            loop.cancel(timer)
        }
        timerDeadline = deadline
        timer = loop.schedule(at: deadline, timerAction)
    }

    private func timerFired() {
        timer = nil
        perform(machine.timerFired(now: loop.now))
        syncTimer()
    }

    /// Takes back a response none of whose bytes reached the socket yet, so the handler can answer
    /// with an error instead; false once any byte left (the response can then only be cut short).
    func retract(_ exchange: HTTPExchange) -> Bool {
        guard exchange === self.exchange, case .started = exchange.progress, writtenTotal <= responseStart,
            case .dropResponse = machine.responseRetracted()
        else { return false }
        perform(.dropResponse)
        exchange.progress = .pending
        exchange.status = 0
        exchange.bytesSent = 0
        return true
    }

    /// Ends a response that cannot be finished: what is queued is still written (the client sees
    /// the head and the partial body, then the close), unless it stalls past the idle timeout.
    func abort(_ exchange: HTTPExchange, reason: String) {
        guard exchange === self.exchange else { return }
        perform(machine.closeAfterFlush(reason: reason))
    }

    /// Gives the socket to a tunnel once `exchange`'s upgrade was accepted (its request complete,
    /// nothing of a response queued): the connection stops watching it, forgets it without closing
    /// it, and returns it with the bytes the client sent past the head. The exchange ends as a
    /// `101` (its access-log line). Nil when the connection cannot hand over (closed meanwhile).
    func handOver(_ exchange: HTTPExchange) -> HandedOverSocket? {
        guard exchange === self.exchange, case .handOver = machine.upgraded() else { return nil }
        if let timer { loop.cancel(timer) }
        timer = nil
        flushAction = nil
        timerAction = nil
        loop.deregister(fd: fd)
        let early = Array(UnsafeRawBufferPointer(input.readable))
        input.consume(input.readableBytes)
        input.releaseIfEmpty(unpooledSize: 0)
        output.releaseIfEmpty(unpooledSize: 0)
        self.exchange = nil
        exchange.connection = nil
        exchange.progress = .ended
        exchange.status = 101
        exchange.finish(.completed, handler: owner.object.handler)
        owner.object.connectionClosed(self)
        return HandedOverSocket(fd: fd, early: early)
    }

    /// The server is stopping: close if idle, else after the current response.
    func shutdown() {
        perform(machine.shutdown())
        updateInterest()
    }

    /// Closes now (an I/O error, the shutdown deadline).
    func close(reason: String?) {
        perform(machine.closeNow(reason: reason))
    }

    /// Executes `.close`: the machine is already `.closed`. An exchange that had not ended is
    /// reported with the reason (a client that went away, or the connection's own failure).
    private func performClose(reason: String?) {
        if let timer { loop.cancel(timer) }
        timer = nil
        flushAction = nil
        timerAction = nil
        loop.deregister(fd: fd)
        closeDescriptor(fd)
        if let exchange {
            self.exchange = nil
            exchange.connection = nil
            if !exchange.isFinished {
                exchange.progress = .aborted
                let reason = reason ?? "closed"
                exchange.finish(
                    reason.hasPrefix("client_closed") ? .clientClosed(reason) : .aborted(reason),
                    handler: owner.object.handler)
            }
        }
        owner.object.connectionClosed(self)
    }
}
