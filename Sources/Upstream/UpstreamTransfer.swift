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
}

/// One request on one easy handle, streaming both ways with pause/resume backpressure.
public final class UpstreamTransfer {
    unowned let client: UpstreamClient
    let handle: EasyHandle
    private var delegate: (any UpstreamTransferDelegate)?
    private let body: RequestBody?
    private var headerList: UnsafeMutablePointer<curl_slist>?
    private var status = 0
    private var fields: [(name: String, value: String)] = []
    private var headDelivered = false
    private var uploadPaused = false
    private var downloadPaused = false
    private var cancelled = false
    private var finished = false
    private var headTimer: TimerID?
    /// The request as sent.
    public let request: UpstreamRequest

    init(client: UpstreamClient, handle: EasyHandle, request: UpstreamRequest, body: RequestBody?, delegate: any UpstreamTransferDelegate) {
        self.client = client
        self.handle = handle
        self.request = request
        self.body = body
        self.delegate = delegate
        configure()
        body?.onData = { [unowned self] in self.bodyDataArrived() }
        headTimer = client.loop.schedule(at: NanoTime.now().adding(seconds: request.timeout)) { [weak self] in
            guard let self, !self.headDelivered else { return }
            self.finish(.timeout("no response head within \(request.timeout) s"))
        }
    }

    /// Resumes a response paused by the delegate.
    public func resumeResponse() {
        guard downloadPaused, !finished else { return }
        downloadPaused = false
        client.unpause(self, mask: pauseMask)
    }

    /// Stops the transfer; the delegate hears nothing more.
    public func cancel() {
        guard !finished else { return }
        cancelled = true
        delegate = nil
        if client.callbackDepth > 0 {
            // libcurl is inside a callback: the aborting return value of the next callback ends
            // the transfer; release it after this event in any case.
            client.loop.afterEvents { [self] in finish(.cancelled) }
        } else {
            finish(.cancelled)
        }
    }

    private var pauseMask: Int32 { (downloadPaused ? Int32(CURLPAUSE_RECV) : 0) | (uploadPaused ? Int32(CURLPAUSE_SEND) : 0) }

    private func bodyDataArrived() {
        guard uploadPaused, !finished else { return }
        uploadPaused = false
        client.unpause(self, mask: pauseMask)
    }

    // MARK: setup

    private func configure() {
        let easy = handle.easy
        let me = Unmanaged.passUnretained(self).toOpaque()
        cc_easy_str(easy, CURLOPT_URL, request.url)
        cc_easy_ptr(easy, CURLOPT_PRIVATE, me)
        cc_easy_long(easy, CURLOPT_NOSIGNAL, 1)
        cc_easy_str(easy, CURLOPT_PROTOCOLS_STR, "http,https")
        cc_easy_long(easy, CURLOPT_PATH_AS_IS, 1)
        cc_easy_long(easy, CURLOPT_SSL_VERIFYPEER, 1)
        cc_easy_long(easy, CURLOPT_SSL_VERIFYHOST, 2)
        cc_easy_long(easy, CURLOPT_HTTP_VERSION, CC_HTTP_VERSION_2TLS)
        cc_easy_long(easy, CURLOPT_CONNECTTIMEOUT_MS, Int(min(request.timeout, 10) * 1000))
        // A stall longer than the route timeout mid-transfer ends it (below 1 byte/s).
        cc_easy_long(easy, CURLOPT_LOW_SPEED_LIMIT, 1)
        cc_easy_long(easy, CURLOPT_LOW_SPEED_TIME, max(1, Int(request.timeout.rounded(.up))))
        cc_easy_long(easy, CURLOPT_BUFFERSIZE, 65536)
        cc_easy_ptr(easy, CURLOPT_ERRORBUFFER, handle.errorBuffer)
        handle.errorBuffer[0] = 0
        cc_easy_write_function(easy, { data, size, count, user in
            Unmanaged<UpstreamTransfer>.fromOpaque(user!).takeUnretainedValue().received(data!, size * count)
        })
        cc_easy_ptr(easy, CURLOPT_WRITEDATA, me)
        cc_easy_header_function(easy, { data, size, count, user in
            Unmanaged<UpstreamTransfer>.fromOpaque(user!).takeUnretainedValue().receivedHeader(data!, size * count)
        })
        cc_easy_ptr(easy, CURLOPT_HEADERDATA, me)

        switch request.method {
        case "GET" where !request.hasBody:
            cc_easy_long(easy, CURLOPT_HTTPGET, 1)
        case "HEAD":
            cc_easy_long(easy, CURLOPT_NOBODY, 1)
        default:
            cc_easy_str(easy, CURLOPT_CUSTOMREQUEST, request.method)
            if request.hasBody {
                cc_easy_long(easy, CURLOPT_POST, 1)
                cc_easy_off(easy, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(request.bodyLength ?? -1))
                cc_easy_read_function(easy, { data, size, count, user in
                    Unmanaged<UpstreamTransfer>.fromOpaque(user!).takeUnretainedValue().send(data!, size * count)
                })
                cc_easy_ptr(easy, CURLOPT_READDATA, me)
            } else if request.method != "GET" {
                // A bodiless POST/PUT/DELETE: send exactly no body, with Content-Length: 0 for POST-likes.
                cc_easy_long(easy, CURLOPT_POST, 1)
                cc_easy_off(easy, CURLOPT_POSTFIELDSIZE_LARGE, 0)
                cc_easy_str(easy, CURLOPT_POSTFIELDS, "")
            }
        }
        var list: UnsafeMutablePointer<curl_slist>?
        for line in request.headers { list = curl_slist_append(list, line) }
        // Suppress what curl would add on its own: the client decides Accept, and no Expect round trip.
        for line in ["Expect:", "Accept:"] where !request.headers.contains(where: { $0.hasPrefix(line) }) {
            list = curl_slist_append(list, line)
        }
        headerList = list
        cc_easy_slist(easy, CURLOPT_HTTPHEADER, list)
    }

    // MARK: libcurl callbacks

    private func receivedHeader(_ data: UnsafeMutablePointer<CChar>, _ length: Int) -> Int {
        guard !cancelled else { return 0 }
        let line = UnsafeRawBufferPointer(start: data, count: length)
        var end = length
        while end > 0 && (line[end - 1] == 0x0A || line[end - 1] == 0x0D) { end -= 1 }
        if end == 0 {
            // The blank line: a final head is complete; 1xx heads are dropped.
            if status >= 200 && !headDelivered {
                headDelivered = true
                if let headTimer { client.loop.cancel(headTimer) }
                delegate?.transfer(self, receivedHead: UpstreamResponseHead(status: status, headers: fields))
            }
            return length
        }
        let text = String(decoding: UnsafeRawBufferPointer(rebasing: line[0..<end]), as: UTF8.self)
        if text.hasPrefix("HTTP/") {
            status = text.split(separator: " ", maxSplits: 2).dropFirst().first.flatMap { Int($0) } ?? 0
            fields.removeAll(keepingCapacity: true)
        } else if let colon = text.firstIndex(of: ":"), line[0] != 0x20, line[0] != 0x09 {
            let value = text[text.index(after: colon)...].trimmingWhitespace()
            fields.append((String(text[..<colon]), String(value)))
        }
        return length
    }

    private func received(_ data: UnsafeMutablePointer<CChar>, _ length: Int) -> Int {
        guard !cancelled, let delegate else { return 0 }
        if delegate.transfer(self, receivedBody: UnsafeRawBufferPointer(start: data, count: length)) { return length }
        downloadPaused = true
        return CC_WRITEFUNC_PAUSE
    }

    private func send(_ data: UnsafeMutablePointer<CChar>, _ length: Int) -> Int {
        guard !cancelled, let body else { return CC_READFUNC_ABORT }
        switch body.read(into: UnsafeMutableRawBufferPointer(start: data, count: length)) {
        case .bytes(let n): return n
        case .end: return 0
        case .wait:
            uploadPaused = true
            return CC_READFUNC_PAUSE
        }
    }

    // MARK: completion

    func completed(code: CURLcode) {
        if code == CURLE_OK { return finish(nil) }
        let message = handle.errorBuffer[0] != 0
            ? String(decoding: UnsafeRawBufferPointer(start: handle.errorBuffer, count: strlen(handle.errorBuffer)), as: UTF8.self)
            : String(cString: curl_easy_strerror(code))
        finish(code == CURLE_OPERATION_TIMEDOUT ? .timeout(message) : .unreachable(message))
    }

    func finish(_ error: UpstreamError?) {
        guard !finished else { return }
        finished = true
        if let headTimer { client.loop.cancel(headTimer) }
        body?.onData = nil
        client.release(self)
        curl_slist_free_all(headerList)
        headerList = nil
        let delegate = self.delegate
        self.delegate = nil
        if error == nil, !headDelivered, status >= 200 {
            headDelivered = true
            delegate?.transfer(self, receivedHead: UpstreamResponseHead(status: status, headers: fields))
        }
        delegate?.transfer(self, completedWith: error ?? (headDelivered ? nil : .unreachable("no response")))
    }
}

extension Substring {
    /// Without leading and trailing spaces and tabs.
    func trimmingWhitespace() -> Substring {
        var s = self
        while let f = s.first, f == " " || f == "\t" { s.removeFirst() }
        while let l = s.last, l == " " || l == "\t" { s.removeLast() }
        return s
    }
}
