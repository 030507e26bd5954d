import CLinux
import Glibc
import HTTP1

/// One client connection on one loop: reads, parses, hands exchanges to the handler,
/// writes responses in order. Decisions come from `ConnectionStateMachine`; this class does the I/O.
final class HTTPConnection: Selectable {
    let fd: CInt
    let peer: String
    /// Index of the listener address it was accepted on.
    let listener: Int
    private let loop: EventLoop
    private unowned let owner: LoopServer
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
    private var inReady = false
    private var processing = false
    private var closeAfterFlush = false
    private var continueSent = false
    private var closed = false
    private var outputWasBlocked = false
    /// Bytes written to the socket so far, and the count at which the current response begins:
    /// while the first is not past the second, no byte of that response has left.
    private var writtenTotal = 0
    private var responseStart = 0
    /// Why the connection closes once its output is flushed (an aborted response keeps what it sent).
    private var abortReason: String?
    private var flushScheduled = false
    /// Made once per connection: scheduling a flush allocates nothing per response.
    private lazy var flushAction: () -> Void = { [weak self] in
        guard let self else { return }
        self.flushScheduled = false
        if !self.closed { self.flush() }
    }
    private lazy var timerAction: () -> Void = { [weak self] in self?.timerFired() }
    var bodyPaused = false

    private static let highWater = 256 * 1024
    private static let lowWater = 64 * 1024
    private var writerWaiting = false
    private static let continueLine = Array("HTTP/1.1 100 Continue\r\n\r\n".utf8)

    init(fd: CInt, peer: String, listener: Int, loop: EventLoop, owner: LoopServer) {
        self.fd = fd
        self.peer = peer
        self.listener = listener
        self.loop = loop
        self.owner = owner
        let limits = owner.configuration
        machine = ConnectionStateMachine(now: loop.now, headerTimeout: limits.headerTimeout, idleTimeout: limits.idleTimeout)
        parser = HTTPRequestHeadParser(limits: HTTPHeadLimits(maxHeadBytes: limits.maxHeadBytes, maxHeaderCount: limits.maxHeaderCount))
        inputLimit = max(limits.maxHeadBytes + 4096, 65536)
        input = ByteBuffer(pool: owner.inputBuffers)
        output = ByteBuffer(pool: owner.outputBuffers)
    }

    func start() throws(IOError) {
        try loop.register(fd: fd, interest: .read, target: self)
        syncTimer()
    }

    /// Whether more output may be queued; a refusal is remembered, and `onWritable` follows once
    /// the buffer drained below the low-water mark (whether or not a write ever blocked).
    var canWrite: Bool {
        if output.readableBytes < Self.highWater { return true }
        writerWaiting = true
        return false
    }

    // MARK: readiness

    func ready(_ events: UInt32) {
        inReady = true
        if events & EPOLLOUT.rawValue != 0 { flush() }
        if !closed, events & (EPOLLIN.rawValue | EPOLLRDHUP.rawValue | EPOLLHUP.rawValue | EPOLLERR.rawValue) != 0 {
            readAndProcess()
        }
        inReady = false
        if !closed { flush() }
        // Between requests a keep-alive connection holds no buffer (the pool has it).
        input.releaseIfEmpty(unpooledSize: 8192)
    }

    private func readAndProcess() {
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
            if closed { return }
            let midRequest = machine.phase == .readingHead || machine.phase == .readingBody
            switch machine.inputEnded() {
            case .close: close(reason: midRequest && exchange != nil ? "client_closed_mid_request" : "client_closed")
            case .proceed, .readNextRequest:
                exchange?.onInputClosed?()
                if !closed { updateInterest() }
            }
            return
        }
        input.didWrite(n)
        process()
    }

    /// Parses heads and body bytes from the input buffer as far as the state allows.
    private func process() {
        guard !processing else { return }
        processing = true
        defer { processing = false }
        while !closed {
            switch machine.phase {
            case .idle, .readingHead:
                guard !input.isEmpty else { return syncTimer() }
                switch parser.parse(input.readable) {
                case .incomplete:
                    machine.headBytesReceived(now: loop.now)
                    return syncTimer()
                case .invalid(let error):
                    machine.headBytesReceived(now: loop.now)
                    return refuse(status: error.status, code: error.errorCode, message: error.message, reason: error.reason)
                case .complete(let head, let consumed):
                    input.consume(consumed)
                    parser.reset()
                    startExchange(head)
                }
            case .readingBody:
                // A finished decoder still owes its end event, even with nothing left to read.
                guard !bodyPaused || exchange?.responseEnded != false, !input.isEmpty || decoder.isComplete else { return syncTimer() }
                decodeBody()
            case .awaitingResponse, .closed:
                return syncTimer()
            }
        }
    }

    private func startExchange(_ head: HTTPRequestHead) {
        let now = loop.now
        machine.headReceived(now: now, keepAlive: head.keepAlive, hasBody: head.framing != .none)
        let exchange = HTTPExchange(head: head, peer: peer, listener: listener, startedAt: now, loop: loop, connection: self)
        self.exchange = exchange
        decoder = HTTPBodyDecoder(framing: head.framing)
        continueSent = false
        bodyPaused = false
        if case .length(let n) = head.framing, n > owner.configuration.maxBodyBytes {
            return refuse(status: 413, code: "body_too_large", message: "The request body is larger than the proxy accepts.")
        }
        owner.handler.handle(exchange)
        guard self.exchange === exchange, !closed else { return }
        if head.expectsContinue && !exchange.responseStarted {
            output.append(Self.continueLine)
            continueSent = true
        }
        if head.framing == .none && !exchange.responseEnded { exchange.onEnd?() }
    }

    private func decodeBody() {
        let (consumed, event) = decoder.decode(input.readable)
        switch event {
        case .data(let range):
            if let exchange {
                exchange.bytesReceived += range.count
                if exchange.bytesReceived > owner.configuration.maxBodyBytes {
                    input.consume(consumed)
                    return refuse(status: 413, code: "body_too_large", message: "The request body is larger than the proxy accepts.")
                }
                if !exchange.responseEnded, let onBody = exchange.onBody {
                    onBody(UnsafeRawBufferPointer(rebasing: input.readable[range]))
                }
            }
            input.consume(consumed)
            machine.bodyProgress(now: loop.now)
        case .needMore:
            input.consume(consumed)
        case .end:
            input.consume(consumed)
            let current = exchange
            if let current, !current.responseEnded { current.onEnd?() }
            // onEnd may have completed the response, which already advanced the machine.
            if exchange === current, machine.phase == .readingBody { apply(machine.bodyEnded(now: loop.now)) }
        case .invalid(let error):
            input.consume(consumed)
            refuse(status: error.status, code: error.errorCode, message: error.message, reason: error.reason)
        }
    }

    // MARK: responses

    /// Answers with a JSON error and closes: used when the request cannot be trusted further.
    private func refuse(status: Int, code: String, message: String, reason: String? = nil) {
        machine.failed()
        if let exchange, exchange.responseStarted {
            return close(reason: code)
        }
        let requestID = owner.requestIDs.next()
        let body = Array("{\"error\":\"\(code)\",\"message\":\"\(message)\",\"requestID\":\"\(requestID)\"}".utf8)
        let head = HTTPResponseHead(status: status, headers: [
            ("Content-Type", "application/json"), ("Content-Length", String(body.count)),
            ("X-Request-ID", requestID), ("Connection", "close"),
        ])
        var bytes: [UInt8] = []
        head.serialize(into: &bytes)
        output.append(bytes)
        output.append(body)
        if let exchange {
            exchange.responseStarted = true
            exchange.responseEnded = true
            exchange.status = status
            owner.handler.refused(exchange, status: status, code: reason ?? code)
        } else {
            owner.handler.protocolError(reason ?? code, status: status, peer: peer, requestID: requestID)
        }
        closeAfterFlush = true
        scheduleFlush()
    }

    func respond(_ exchange: HTTPExchange, status: Int, headers: [(name: String, value: String)], body: UnsafeRawBufferPointer) {
        writeHead(exchange, status: status, framing: "Content-Length", value: String(body.count)) { bytes in
            for (name, value) in headers { Self.appendField(name, value, into: &bytes) }
        }
        if !exchange.isHead { output.append(body) }
        exchange.bytesSent = body.count
        endResponse(exchange)
    }

    func startResponse(_ exchange: HTTPExchange, status: Int, framing: HTTPExchange.ResponseFraming,
                       writeFields: (inout [UInt8]) -> Void) {
        switch framing {
        case .length(let length):
            exchange.declaredLength = length
            writeHead(exchange, status: status, framing: "Content-Length", value: String(length), writeFields)
        case .bodiless:
            exchange.isHead = true
            writeHead(exchange, status: status, framing: nil, value: "", writeFields)
        case .streamed where exchange.head.version == .http11:
            exchange.chunkedResponse = !exchange.isHead
            writeHead(exchange, status: status, framing: exchange.isHead ? nil : "Transfer-Encoding", value: "chunked", writeFields)
        case .streamed:
            if !exchange.isHead { machine.responseWillBeCloseDelimited() }
            writeHead(exchange, status: status, framing: nil, value: "", writeFields)
        }
        scheduleFlush()
    }

    func writeBody(_ exchange: HTTPExchange, _ bytes: UnsafeRawBufferPointer) {
        guard bytes.count > 0, !exchange.isHead else { return }
        if let declared = exchange.declaredLength, exchange.bytesSent + bytes.count > declared {
            // More body than the Content-Length sent: the rest would be read as another response.
            // Send what was declared and close after this response.
            machine.responseWillBeCloseDelimited()
            let allowed = max(0, declared - exchange.bytesSent)
            exchange.bodyOverran = true
            if allowed > 0 { writeBody(exchange, UnsafeRawBufferPointer(rebasing: bytes[0..<allowed])) }
            return
        }
        if exchange.chunkedResponse {
            output.append(Array((String(bytes.count, radix: 16) + "\r\n").utf8))
            output.append(bytes)
            output.append(Self.crlf)
        } else {
            output.append(bytes)
        }
        exchange.bytesSent += bytes.count
        scheduleFlush()
    }

    func endResponse(_ exchange: HTTPExchange) {
        if exchange.chunkedResponse { output.append(Self.lastChunk) }
        exchange.responseEnded = true
        exchange.onBody = nil
        let mustClose = machine.phase == .readingBody && exchange.head.expectsContinue && !continueSent
        let decision = machine.responseEnded(now: loop.now, mustClose: mustClose)
        owner.handler.completed(exchange)
        apply(decision)
        scheduleFlush()
    }

    private static let crlf = Array("\r\n".utf8)
    private static let lastChunk = Array("0\r\n\r\n".utf8)

    /// Serialises a response head into the loop's scratch array (shared by its connections, kept
    /// between responses, so no allocation) and queues it.
    private func writeHead(_ exchange: HTTPExchange, status: Int, framing: String?, value: String,
                           _ writeFields: (inout [UInt8]) -> Void) {
        exchange.responseStarted = true
        exchange.status = status
        responseStart = writtenTotal + output.readableBytes
        var head = owner.takeHeadScratch()
        head.append(contentsOf: HTTPResponseHead.statusLine(status))
        writeFields(&head)
        if let framing { Self.appendField(framing, value, into: &head) }
        if machine.closesAfterResponse { Self.appendField("Connection", "close", into: &head) }
        head.append(contentsOf: Self.crlf)
        output.append(head)
        owner.returnHeadScratch(head)
    }

    /// Appends `name: value\r\n`.
    static func appendField(_ name: String, _ value: String, into bytes: inout [UInt8]) {
        bytes.append(contentsOf: name.utf8)
        bytes.append(UInt8(ascii: ":"))
        bytes.append(UInt8(ascii: " "))
        bytes.append(contentsOf: value.utf8)
        bytes.append(contentsOf: crlf)
    }

    private func apply(_ decision: ConnectionStateMachine.Decision) {
        switch decision {
        case .proceed:
            break
        case .readNextRequest:
            exchange?.connection = nil
            exchange = nil
            decoder = HTTPBodyDecoder(framing: .none)
            if !processing { process() }
        case .close:
            exchange?.connection = nil
            exchange = nil
            closeAfterFlush = true
            scheduleFlush()
        }
    }

    func resumeBody() {
        guard bodyPaused else { return }
        bodyPaused = false
        if !inReady {
            process()
            scheduleFlush()
        }
    }

    /// Output queued outside this connection's own event (an upstream callback, a timer) is
    /// written once at the end of the loop iteration: head and body leave in one segment, and no
    /// write error can close the connection from inside a libcurl callback.
    private func scheduleFlush() {
        guard !inReady, !flushScheduled, !closed else { return }
        flushScheduled = true
        loop.afterEvents(flushAction)
    }

    // MARK: output

    private func flush() {
        while !output.isEmpty {
            let readable = output.readable
            let result: IOResult<Int>
            do {
                result = try syscall(blocking: false, where: "write") { Glibc.write(fd, readable.baseAddress, readable.count) }
            } catch {
                return close(reason: "write_error")
            }
            guard case .processed(let n) = result else { break }
            output.consume(n)
            writtenTotal += n
        }
        if output.isEmpty {
            output.releaseIfEmpty(unpooledSize: 16384)
            if closeAfterFlush { return close(reason: abortReason) }
            if outputWasBlocked {
                outputWasBlocked = false
                machine.outputBlocked(false, now: loop.now)
            }
        } else if !outputWasBlocked {
            outputWasBlocked = true
            machine.outputBlocked(true, now: loop.now)
        }
        if writerWaiting && output.readableBytes < Self.lowWater {
            writerWaiting = false
            exchange?.onWritable?()
            if closed { return }
        }
        syncTimer()
        updateInterest()
    }

    private func updateInterest() {
        guard !closed else { return }
        var wanted: Interest = []
        let reading: Bool
        switch machine.phase {
        case .idle, .readingHead: reading = true
        case .readingBody: reading = !bodyPaused || exchange?.responseEnded != false
        case .awaitingResponse: reading = input.readableBytes < inputLimit && !machine.inputClosed
        case .closed: reading = false
        }
        if reading && !closeAfterFlush && !outputWasBlocked { wanted.insert(.read) }
        if !output.isEmpty { wanted.insert(.write) }
        guard wanted != interest else { return }
        interest = wanted
        do { try loop.reregister(fd: fd, interest: wanted) } catch { close(reason: "epoll_error") }
    }

    // MARK: timers and closing

    /// Keeps one timer per connection: extended deadlines are rechecked when it fires, an
    /// earlier deadline replaces it.
    private func syncTimer() {
        guard !closed, let deadline = machine.deadline else { return }
        if let timer {
            guard deadline < timerDeadline else { return }
            loop.cancel(timer)
        }
        timerDeadline = deadline
        timer = loop.schedule(at: deadline, timerAction)
    }

    private func timerFired() {
        timer = nil
        switch machine.timerFired(now: loop.now) {
        case .close: close(reason: "timeout")
        case .proceed, .readNextRequest: syncTimer()
        }
    }

    /// The server is stopping: close if idle, else after the current response.
    /// Takes back a response none of whose bytes reached the socket yet, so the handler can answer
    /// with an error instead; false once any byte left (the response can then only be cut short).
    func retract(_ exchange: HTTPExchange) -> Bool {
        guard exchange === self.exchange, exchange.responseStarted, !exchange.responseEnded, !closed,
              writtenTotal <= responseStart else { return false }
        output.truncate(keeping: responseStart - writtenTotal)
        exchange.responseStarted = false
        exchange.status = 0
        exchange.bytesSent = 0
        exchange.chunkedResponse = false
        exchange.declaredLength = nil
        // A bodiless framing (204, 304) marked it; the error that replaces it has a body.
        exchange.isHead = exchange.head.methodIs("HEAD")
        return true
    }

    /// Ends a response that cannot be finished: what is queued is still written (the client sees
    /// the head and the partial body, then the close), unless it stalls past the idle timeout.
    func abort(reason: String) {
        guard !closed else { return }
        if output.isEmpty { return close(reason: reason) }
        machine.failed()
        abortReason = reason
        closeAfterFlush = true
        updateInterest()
        scheduleFlush()
    }

    func shutdown() {
        switch machine.shutdown() {
        case .close: close(reason: nil)
        case .proceed, .readNextRequest: updateInterest()
        }
    }

    func close(reason: String?) {
        guard !closed else { return }
        closed = true
        machine.failed()
        if let timer { loop.cancel(timer) }
        timer = nil
        loop.deregister(fd: fd)
        closeDescriptor(fd)
        if let exchange, !exchange.responseEnded {
            exchange.isAborted = true
            exchange.connection = nil
            exchange.onAbort?()
            owner.handler.aborted(exchange, reason: reason ?? "closed")
        }
        exchange?.connection = nil
        exchange = nil
        owner.connectionClosed(self)
    }
}
