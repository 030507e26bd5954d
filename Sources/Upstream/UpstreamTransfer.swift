import CCurl
import EventLoop
import Glibc

/// Receives a transfer's events, on its loop.
public protocol UpstreamTransferDelegate: AnyObject {
    /// The final response head arrived.
    func transfer(_ transfer: UpstreamTransfer, receivedHead head: UpstreamResponseHead)
    /// Response body bytes; return false to pause (the same bytes come again after `resumeResponse`).
    func transfer(_ transfer: UpstreamTransfer, receivedBody bytes: UnsafeRawBufferPointer) -> Bool
    /// The transfer ended; `error` is nil on success.
    func transfer(_ transfer: UpstreamTransfer, completedWith error: UpstreamError?)
    /// The request body's last byte was handed to libcurl: the head timeout starts now.
    func transferSentRequestBody(_ transfer: UpstreamTransfer)
}

extension UpstreamTransferDelegate {
    /// Most delegates do not care when the body went out.
    public func transferSentRequestBody(_ transfer: UpstreamTransfer) {}
}

/// One request on one easy handle, streaming both ways with pause/resume backpressure.
public final class UpstreamTransfer {
    /// The client, unretained: the client holds its transfers while they run and lives as long
    /// as its loop; after `finish` a transfer touches it no more. (A checked `unowned` costs an
    /// atomic increment and decrement per use, several per request.)
    private let owner: Unretained<UpstreamClient>
    /// The client that runs this transfer (`owner`).
    var client: UpstreamClient { owner.object }
    let handle: EasyHandle
    private var delegate: (any UpstreamTransferDelegate)?
    private let body: RequestBody?
    private var head = UpstreamResponseHead(status: 0)
    /// The lifecycle: the head is awaited, then the body streams; after `cancel` every libcurl
    /// callback aborts until `finish` releases the handle. A response that came whole while the
    /// request body was still going up is `answered`: the body has until `cutAt` to finish going
    /// up on its own, then the upload is cut (`responseCameWhole`, `cutUpload`). (The two pause
    /// flags below are libcurl's pause mask, not lifecycle.)
    private enum Phase: Equatable { case awaitingHead, receivingBody, answered(cutAt: NanoTime), cancelled, finished }
    private var phase = Phase.awaitingHead
    private var uploadPaused = false
    /// The request body's last byte was handed to libcurl (or there is none to send). libcurl
    /// asks for the end of a body of unknown length (`send` answers 0), not of one whose length
    /// it was given: that one ends when `uploadLeft` reaches 0.
    private var uploadEnded: Bool
    /// Bytes of a body of known length still to hand to libcurl (-1: unknown length).
    private var uploadLeft: Int
    /// Response body bytes still to come by the head's `Content-Length` while the request body
    /// is still going up (else -1): at 0 the answer is whole (`responseCameWhole`).
    private var answerLeft = -1
    /// Why a response head that arrived whole was not relayed (the transfer fails with it).
    private(set) var refusedHead: String?
    /// Why libcurl was stopped before a send (`sending`): the transfer fails with it.
    private var refusedSend: UpstreamError?
    /// Sends libcurl began: a second is its own retry on a new connection (`UpstreamRequest.sendsOnce`).
    private var sends = 0
    private let sendsOnce: Bool
    private let refusesOwnListeners: Bool
    private var downloadPaused = false
    /// When the response head is due (nil: not awaited, or not yet: a body is still going up).
    /// No loop timer per transfer: the client sweeps its transfers at the earliest deadline
    /// (`UpstreamClient.sweepDeadlines`).
    private(set) var headDeadline: NanoTime?
    /// When a byte last moved either way (or the transfer was resumed): a stall is `timeout`
    /// seconds without one, while the body goes up and after the head.
    private var lastProgress: NanoTime
    /// Index in the client's in-flight list, -1 when not in it (`UpstreamClient.release`).
    var activeIndex = -1
    /// Seconds allowed until the response head, and for any stall after it (`UpstreamRequest.timeout`);
    /// once the head arrived, a stream's own idle limit when it has one (`streamIdle`).
    private var timeout: Double
    /// The stall limit after the head: the route's, for any response, or nil (`UpstreamRequest.streamIdleTimeout`).
    private let streamIdle: Double?
    /// The stall limit after the head of an event stream (`UpstreamRequest.eventStreamIdleTimeout`).
    private let eventStreamIdle: Double
    /// The request goes over TLS (an https upstream).
    private let overTLS: Bool
    /// Over TLS with HTTP/1.x and a Content-Length: the body bytes still to come (else -1), to
    /// look, once they came, for bytes past them in OpenSSL (`endOfTLSBody`).
    private var tlsBodyLeft = -1
    /// The request has a body to send, and libcurl decodes the response's content coding.
    private let sendsBody: Bool
    private let decodes: Bool
    /// The local port of the connection the request last went out on (`sending`): the closing
    /// socket that carried it is found by it (`UpstreamClient.closeSocket`).
    private(set) var localPort = -1
    /// The upstream's answer, read from the connection as libcurl closed it after a send failed
    /// (`UpstreamClient.keepEarlyAnswer`), relayed when the transfer completes (`relayEarlyAnswer`).
    var earlyAnswer: [UInt8]?
    /// Whether `earlyAnswer` holds every byte up to the connection's end (a reset or an EOF came
    /// after them), not just the first `earlyAnswerLimit`: only then can an answer framed by the
    /// connection's end be relayed.
    var earlyAnswerReachesEnd = false

    /// The request is read, not kept: libcurl copies the URL and the handle the header lines
    /// (`configure`), so no copy of its strings is retained per transfer.
    init(
        client: UpstreamClient, handle: EasyHandle, request: borrowing UpstreamRequest, body: RequestBody?,
        delegate: any UpstreamTransferDelegate
    ) {
        owner = Unretained(client)
        self.handle = handle
        timeout = request.timeout
        streamIdle = request.streamIdleTimeout
        eventStreamIdle = request.eventStreamIdleTimeout
        overTLS = request.target.isHTTPS
        sendsOnce = request.sendsOnce
        sendsBody = body != nil && request.hasBody
        decodes = request.decodesContent
        refusesOwnListeners = request.refusesOwnListeners
        lastProgress = client.loop.now
        self.body = body
        self.delegate = delegate
        uploadEnded = body == nil || !request.hasBody || request.bodyLength == 0
        uploadLeft = request.bodyLength ?? -1
        // The handle's head storage is taken, not copied (a copy retains its arrays); the handle
        // is left the empty head this one started as, until `finish` swaps them back.
        swap(&head, &handle.spareHead)
        handle.running = Unmanaged.passUnretained(self)
        configure(request)
        body?.onData = { [unowned self] in self.bodyDataArrived() }
        // The wait for the response head starts once the request is sent: a long upload is not
        // a slow upstream. While body bytes go up, the stall deadline runs instead.
        if body == nil || !request.hasBody {
            startHeadTimer()
        } else {
            client.deadlineAwaited(lastProgress.adding(seconds: timeout))
        }
    }

    private func startHeadTimer() {
        guard headDeadline == nil, phase == .awaitingHead else { return }
        let deadline = client.loop.now.adding(seconds: timeout)
        headDeadline = deadline
        client.deadlineAwaited(deadline)
    }

    /// When this transfer must next be looked at: its head deadline, or while the body goes up or
    /// comes down (and neither side is held by the client: not reading, or its own body not
    /// there yet, as for an upstream that answers while the body arrives), `timeout` after the
    /// last byte moved. libcurl's own low-speed check is off: it averages bytes per second, so a stream
    /// that sends a small heartbeat every few seconds fell under its 1 byte/s and was cut.
    var deadline: NanoTime? {
        if let headDeadline { return headDeadline }
        switch phase {
        case .awaitingHead where body != nil && !uploadPaused, .receivingBody where !downloadPaused && !uploadPaused:
            return lastProgress.adding(seconds: timeout)
        case .answered(let cutAt):
            return cutAt
        case .awaitingHead, .receivingBody, .cancelled, .finished:
            return nil
        }
    }

    /// Either direction is paused (libcurl watches none of its sockets for it meanwhile).
    var isPaused: Bool { downloadPaused || uploadPaused }
    /// No response head came yet, and none was refused.
    var headAwaited: Bool { phase == .awaitingHead && refusedHead == nil && refusedSend == nil }
    /// The request sends a body over plain HTTP (`awaitsEarlyAnswer`).
    var sendsBodyInPlainHTTP: Bool { sendsBody && !overTLS }
    /// libcurl decodes the response's content coding (`relayEarlyAnswer`).
    var decodesContentCoding: Bool { decodes }

    /// Whether the response came whole while the body was still going up.
    private var isAnswered: Bool { if case .answered = phase { true } else { false } }

    /// The client's sweep found `deadline` passed.
    func deadlinePassed() {
        guard let deadline, deadline <= client.loop.now else { return }
        switch phase {
        case .answered: return cutUpload()
        case .awaitingHead, .receivingBody: break
        case .cancelled, .finished: return
        }
        if headDeadline != nil {
            headDeadline = nil
            return finish(.timeout("no response head within \(timeout) s of the request's last byte"))
        }
        finish(.timeout("no byte moved for \(timeout) s"))
    }

    /// A byte moved, or a side the client held resumed: the stall deadline starts again.
    @inline(__always)
    private func progressed() { lastProgress = client.loop.now }

    /// Resumes a response paused by the delegate.
    public func resumeResponse() {
        guard downloadPaused, phase != .finished, !isAnswered else { return }
        downloadPaused = false
        progressed()
        client.deadlineAwaited(lastProgress.adding(seconds: timeout))
        client.unpause(self, mask: pauseMask)
    }

    /// Stops the transfer; the delegate hears nothing more.
    public func cancel() {
        guard phase != .finished else { return }
        phase = .cancelled
        delegate = nil
        if client.callbackDepth > 0 {
            // libcurl is inside a callback: the aborting return value of the next callback ends
            // the transfer; release it after this event in any case.
            client.loop.afterEvents { [self] in finish(.cancelled) }
        } else {
            finish(.cancelled)
        }
    }

    private var pauseMask: Int32 {
        (downloadPaused ? Int32(CURLPAUSE_RECV) : 0) | (uploadPaused ? Int32(CURLPAUSE_SEND) : 0)
    }

    private func bodyDataArrived() {
        guard uploadPaused, phase != .finished else { return }
        uploadPaused = false
        progressed()
        if headDeadline == nil { client.deadlineAwaited(lastProgress.adding(seconds: timeout)) }
        client.unpause(self, mask: pauseMask)
    }

    // MARK: setup

    /// Sets what differs per request; options common to every request were set once on the
    /// handle (`EasyHandle.init`), so no `curl_easy_reset` and no re-setting them per request.
    private func configure(_ request: borrowing UpstreamRequest) {
        if let named = request.tls?.named(request.target) {
            handle.setURL(named.target)
            handle.setConnectTo(named.connectTo)
        } else {
            handle.setURL(request.target)
            handle.setConnectTo(nil)
        }
        // https: wait for a connection being set up to say whether it multiplexes (h2 by ALPN)
        // rather than opening one per concurrent request: 64 requests then share one connection
        // instead of 33+. Plain http is HTTP/1.1 here, where there is nothing to wait for.
        handle.setPipeWait(overTLS)
        handle.allowReuse()
        handle.setTimeout(request.timeout)
        handle.setDecoding(request.decodesContent)
        handle.setTLS(request.tls)
        handle.errorBuffer[0] = 0

        let method = request.method
        if method == "HEAD" {
            handle.setMethod(.head)
        } else if request.hasBody {
            handle.setMethod(.withBody(method: method, length: request.bodyLength))
        } else if method == "GET" {
            handle.setMethod(.get)
        } else {
            handle.setMethod(.bodiless(method: method))
        }
        // Suppress what curl would add on its own: no Accept, Content-Type or Expect round trip
        // the client did not ask for. The last two come only with POST semantics (a body, or
        // POST/PUT/PATCH sent with an empty one).
        let postLike = request.hasBody || method == "POST" || method == "PUT" || method == "PATCH"
        let own =
            request.supplies.map { ($0.accept, $0.contentType) }
            ?? request.headers.containsNames("accept", "content-type")
        let extra =
            request.extraSupplies.map { ($0.accept, $0.contentType) }
            ?? request.extraHeaders.containsNames("accept", "content-type")
        handle.setHeaders(
            request.headers, request.extraHeaders, blankAccept: !own.0 && !extra.0,
            blankContentType: postLike && !own.1 && !extra.1, blankExpect: postLike)
    }

    // MARK: libcurl callbacks

    /// Cancelled (or already released): libcurl's callbacks end the transfer.
    private var aborting: Bool { phase == .cancelled || phase == .finished }

    func receivedHeader(_ data: UnsafeMutablePointer<CChar>, _ length: Int) -> Int {
        guard !aborting else { return 0 }
        // The blank line after a final head delivers it; 1xx heads end without one.
        let line = head.read(line: UnsafeRawBufferPointer(start: data, count: length))
        if line == .field, head.fields.count > UpstreamResponseHead.maxFields, phase == .awaitingHead {
            refusedHead = "the response head has more than \(UpstreamResponseHead.maxFields) fields"
            return 0
        }
        if line == .folded, phase == .awaitingHead {
            refusedHead = "the response folds a header line (obsolete line folding)"
            return 0
        }
        if line == .unreadableFraming, phase == .awaitingHead {
            refusedHead =
                "the response has a Content-Length or Transfer-Encoding field with a CR, LF or NUL in its value"
            return 0
        }
        if line == .end, head.status == 101, phase == .awaitingHead {
            // No hop asks to switch (Upgrade is hop-by-hop, never forwarded): libcurl would take
            // the 101 for an interim head and wait for a final one that never comes.
            refusedHead = "the upstream switched protocols (101) though no upgrade was asked for"
            return 0
        }
        if line == .end, head.status >= 200, phase == .awaitingHead {
            guard head.contentLengthsAgree else {
                // Not relayed: libcurl ends the transfer (the short count), `completed` says why.
                refusedHead = "the response has Content-Length fields that differ"
                return 0
            }
            guard head.contentLengthReadable else {
                refusedHead = "the response has a Content-Length that is not a number"
                return 0
            }
            phase = .receivingBody
            headDeadline = nil
            if let streamIdle {
                timeout = streamIdle
            } else if head.isEventStream {
                timeout = eventStreamIdle
            }
            if overTLS { watchTLSBody() }
            progressed()
            client.deadlineAwaited(lastProgress.adding(seconds: timeout))
            // Lent to the delegate by a swap: passing the property would copy it (retaining both
            // of its arrays), as the delegate could reach it through `self` while it runs.
            var delivered = UpstreamResponseHead(status: 0)
            swap(&delivered, &head)
            delegate?.transfer(self, receivedHead: delivered)
            swap(&delivered, &head)
            if !uploadEnded { watchEarlyAnswer() }
        }
        return length
    }

    /// An HTTP/1.x response over TLS with a Content-Length: libcurl reads its body only up to
    /// that length, so bytes an upstream sent past it in the body's last TLS record stay in
    /// OpenSSL, decrypted, where neither libcurl's liveness check (a peek at the socket) nor the
    /// loop sees them; reused, the connection would hand them to the next request, perhaps
    /// another client's. HTTP/2 frames name their stream: bytes past a response are the session's.
    /// The length is libcurl's, which is what bounds its reads: it takes `+5` and `5, 5`, which
    /// `head.contentLength` does not (with it, such a response's stray bytes would reach the next
    /// request).
    private func watchTLSBody() {
        var version = 0
        var length: curl_off_t = -1
        guard cc_info_long(handle.easy, CURLINFO_HTTP_VERSION, &version) == CURLE_OK, version < CC_HTTP_VERSION_2_0,
            cc_info_off(handle.easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length) == CURLE_OK, length >= 0
        else { return }
        tlsBodyLeft = Int(length)
        if length == 0 { endOfTLSBody() }
    }

    /// The body came whole: bytes left in OpenSSL past it mean the connection is not reused.
    private func endOfTLSBody() {
        tlsBodyLeft = -1
        if let ssl = cc_info_openssl_connection(handle.easy), cc_openssl_has_pending(ssl) != 0 { handle.forbidReuse() }
    }

    /// The head came while the request body still goes up. libcurl 7.88 stops sending on a final
    /// status of 300 or more, but on a 2xx it sends the rest of the body even after the response
    /// came whole (unless the upstream said it closes), while nobody waits for it: the client was
    /// answered and may be gone. So the response's length is watched (its `Content-Length`; none
    /// for 204 and 304), and once it came whole the upload is given a moment to end, then cut
    /// (`responseCameWhole`), as Go's HTTP client does (nginx cuts at once). A response of
    /// unknown length (chunked) is not watched.
    private func watchEarlyAnswer() {
        if head.status == 204 || head.status == 304 { return responseCameWhole() }
        guard let length = head.contentLength else { return }
        answerLeft = length
        if length == 0 { responseCameWhole() }
    }

    /// The response came whole while the request body was still going up. A body that is about
    /// to end (a small one whose last bytes were still on their way: an upstream that answers on
    /// the head) has `uploadGrace` seconds to: libcurl then ends the transfer as usual and pools
    /// the connection. Whatever ends it, it ends as a success: the answer is whole.
    private func responseCameWhole() {
        answerLeft = -1
        guard phase == .receivingBody, !uploadEnded else { return }
        let cutAt = client.loop.now.adding(seconds: Self.uploadGrace)
        phase = .answered(cutAt: cutAt)
        client.deadlineAwaited(cutAt)
    }

    /// How long the body may go on after the response came whole (the client's sweep may look
    /// up to 0.1 s later).
    static let uploadGrace = 0.1

    /// The body did not end within `uploadGrace` of the whole answer: the upload is cut and the
    /// transfer ends as a success (from the client's sweep, outside libcurl's callbacks). An
    /// HTTP/1.x connection is closed, never pooled: its request did not go out whole, so the
    /// upstream would read the next request as the rest of this body (removing the handle early
    /// closes it in libcurl 7.88 anyway). An HTTP/2 stream is reset, its connection kept. The
    /// client's exchange then ends and the server drains or closes the rest of its body; the
    /// body buffered here is released with the exchange.
    private func cutUpload() {
        var version = 0
        if cc_info_long(handle.easy, CURLINFO_HTTP_VERSION, &version) != CURLE_OK || version < CC_HTTP_VERSION_2_0 {
            handle.forbidReuse()
        }
        finish(nil)
    }

    /// libcurl is about to send the request to `primaryIP`:`port` (`CURLOPT_PREREQFUNCTION`), on
    /// a new or a reused connection; false stops the transfer before a byte of it goes out.
    func sending(
        to primaryIP: UnsafeMutablePointer<CChar>?, port: Int, from localIP: UnsafeMutablePointer<CChar>?,
        localPort: Int
    ) -> Bool {
        guard !aborting else { return false }
        sends += 1
        self.localPort = localPort
        earlyAnswer = nil
        if sends > 1 && sendsOnce {
            refusedSend = .staleConnection(
                "the reused connection closed before any response, and this request is not sent twice")
            return false
        }
        if refusesOwnListeners, let primaryIP, let localIP,
            client.reachesOwnListener(primary: primaryIP, port: port, local: localIP)
        {
            refusedSend = .loop("the hop would connect to this proxy's own listener")
            return false
        }
        return true
    }

    func received(_ data: UnsafeMutablePointer<CChar>, _ length: Int) -> Int {
        client.tuning?.bodyMoved()
        if isAnswered { return length }
        guard !aborting, let delegate else { return 0 }
        progressed()
        if delegate.transfer(self, receivedBody: UnsafeRawBufferPointer(start: data, count: length)) {
            if tlsBodyLeft >= 0 {  // counted once taken: paused, libcurl hands the same bytes again
                tlsBodyLeft -= length
                if tlsBodyLeft <= 0 { endOfTLSBody() }
            }
            if answerLeft >= 0 {
                answerLeft -= length
                if answerLeft <= 0 { responseCameWhole() }
            }
            return length
        }
        downloadPaused = true
        return CC_WRITEFUNC_PAUSE
    }

    func send(_ data: UnsafeMutablePointer<CChar>, _ length: Int) -> Int {
        client.tuning?.bodyMoved()
        guard !aborting, let body else { return CC_READFUNC_ABORT }
        switch body.read(into: UnsafeMutableRawBufferPointer(start: data, count: length)) {
        case .bytes(let n):
            progressed()
            if uploadLeft > 0 {
                uploadLeft -= n
                if uploadLeft <= 0 { uploadSent() }
            }
            return n
        case .end:
            uploadSent()
            startHeadTimer()
            delegate?.transferSentRequestBody(self)
            return 0
        case .wait:
            uploadPaused = true
            return CC_READFUNC_PAUSE
        }
    }

    /// The request body's last byte was handed to libcurl: an answer is no longer early.
    private func uploadSent() {
        uploadEnded = true
        answerLeft = -1
    }

    // MARK: completion

    func completed(code: CURLcode) {
        // The answer came whole: a send that failed after it (the upstream closed) changes nothing.
        if isAnswered { return finish(nil) }
        if let refusedSend { return finish(refusedSend) }
        if let refusedHead { return finish(.unreachable(refusedHead)) }
        if code == CURLE_OK { return finish(nil) }
        if code == CURLE_SEND_ERROR, let answer = earlyAnswer, relayEarlyAnswer(answer) { return }
        let message =
            handle.errorBuffer[0] != 0
            ? String(
                decoding: UnsafeRawBufferPointer(start: handle.errorBuffer, count: strlen(handle.errorBuffer)),
                as: UTF8.self)
            : String(cString: curl_easy_strerror(code))
        if code == CURLE_OPERATION_TIMEDOUT { return finish(.timeout(message)) }
        if code == CURLE_BAD_FUNCTION_ARGUMENT, phase == .awaitingHead {
            // libcurl 7.88 stores each response field for `curl_easy_header` before our callback
            // sees it, and fails so on a first field line that begins with a space or tab: a
            // fold with no field before it to continue (`EasyHandle.renew`).
            return finish(
                .unreachable("the response head's first field line begins with a space or tab (obsolete line folding)"))
        }
        if code == CURLE_OUT_OF_MEMORY, phase == .awaitingHead {
            // libcurl 7.88 refuses a header line over 100 KiB as "Out of memory", which misleads.
            return finish(
                .unreachable(
                    "the response head is larger than libcurl accepts (a line over 100 KiB), or libcurl ran out of memory"
                ))
        }
        finish(failedOnReusedConnection(code) ? .staleConnection(message) : .unreachable(message))
    }

    /// Whether `code` is a send or receive failure on a connection libcurl took from its pool,
    /// before any byte of a response head came back (`UpstreamError.staleConnection`): the send
    /// failed (nginx closing an idle HTTP/2 connection as the request went out: "Send failure:
    /// Broken pipe"), the connection ended under the stream (libcurl 7.88 says "HTTP/2 stream 3
    /// was not closed cleanly before end of the underlying stream" with `CURLE_PARTIAL_FILE`;
    /// later versions `CURLE_HTTP2_STREAM`), or it read nothing.
    private func failedOnReusedConnection(_ code: CURLcode) -> Bool {
        guard
            code == CURLE_SEND_ERROR || code == CURLE_RECV_ERROR || code == CURLE_GOT_NOTHING
                || code == CURLE_PARTIAL_FILE || code == CURLE_HTTP2 || code == CURLE_HTTP2_STREAM,
            phase == .awaitingHead, head.status == 0
        else { return false }
        var connects = 0, headerBytes = 0
        guard cc_info_long(handle.easy, CURLINFO_NUM_CONNECTS, &connects) == CURLE_OK,
            cc_info_long(handle.easy, CURLINFO_HEADER_SIZE, &headerBytes) == CURLE_OK
        else { return false }
        return connects == 0 && headerBytes == 0
    }

    func finish(_ error: UpstreamError?) {
        guard phase != .finished else { return }
        let headDelivered = phase == .receivingBody || isAnswered
        phase = .finished
        headDeadline = nil
        body?.onData = nil
        client.release(self)
        let delegate = self.delegate
        self.delegate = nil
        // A head is delivered only by its blank line: libcurl 7.88 completes a transfer whose
        // upstream closed inside the head (`HTTP/1.1 200 OK` and nothing after) without an
        // error, and relaying that head would turn a dead upstream into an empty 200.
        let incomplete =
            headDelivered
            ? nil
            : UpstreamError.unreachable(
                head.status == 0 ? "no response" : "the upstream closed the connection inside its response head")
        head.emptied()
        swap(&head, &handle.spareHead)
        delegate?.transfer(self, completedWith: error ?? incomplete)
    }
}
