import CCurl

/// One blocking request with libcurl's easy interface, for the command line (never on a loop).
public enum BlockingHTTP {
    /// Where and how to reach the proxy.
    public struct Target: Sendable {
        /// `http://127.0.0.1:8080`-style base URL.
        public var baseURL: String
        /// A Unix socket path instead of TCP, if the proxy listens on one.
        public var unixSocket: String?
        /// Extra header lines (e.g. `X-Proxy-Key: …`).
        public var headers: [String]

        /// Creates a target.
        public init(baseURL: String, unixSocket: String?, headers: [String]) {
            self.baseURL = baseURL
            self.unixSocket = unixSocket
            self.headers = headers
        }
    }

    /// Sends `method path` (a POST with `json` as its body, if given) and returns status and body;
    /// `onData` may stream the body instead (return false to stop). Fails with libcurl's message.
    public static func request(
        _ method: String, _ path: String, to target: Target, timeout: Double, json: String? = nil,
        onData: ((UnsafeRawBufferPointer) -> Bool)? = nil
    ) -> Result<(status: Int, body: [UInt8]), BlockingHTTPError> {
        UpstreamClient.globalInit()
        guard let easy = curl_easy_init() else { return .failure(BlockingHTTPError(message: "curl_easy_init failed")) }
        defer { curl_easy_cleanup(easy) }
        final class Sink {
            var body: [UInt8] = []
            var onData: ((UnsafeRawBufferPointer) -> Bool)?
        }
        let sink = Sink()
        sink.onData = onData
        cc_easy_str(easy, CURLOPT_URL, target.baseURL + path)
        if let socket = target.unixSocket { cc_easy_str(easy, CURLOPT_UNIX_SOCKET_PATH, socket) }
        cc_easy_long(easy, CURLOPT_NOSIGNAL, 1)
        cc_easy_long(easy, CURLOPT_TIMEOUT_MS, Int(timeout * 1000))
        cc_easy_str(easy, CURLOPT_CUSTOMREQUEST, method)
        if method == "POST" {
            // COPYPOSTFIELDS: curl keeps its own copy, so the Swift string may go away.
            cc_easy_str(easy, CURLOPT_COPYPOSTFIELDS, json ?? "")
        }
        var list: UnsafeMutablePointer<curl_slist>?
        let contentType = json == nil ? [] : ["Content-Type: application/json"]
        for line in target.headers + contentType + ["Expect:"] { list = curl_slist_append(list, line) }
        defer { curl_slist_free_all(list) }
        cc_easy_slist(easy, CURLOPT_HTTPHEADER, list)
        cc_easy_ptr(easy, CURLOPT_WRITEDATA, Unmanaged.passUnretained(sink).toOpaque())
        cc_easy_write_function(
            easy,
            { data, size, count, user in
                let sink = Unmanaged<Sink>.fromOpaque(user!).takeUnretainedValue()
                let bytes = UnsafeRawBufferPointer(start: data, count: size * count)
                if let onData = sink.onData { return onData(bytes) ? size * count : 0 }
                sink.body.append(contentsOf: bytes)
                return size * count
            })
        let code = curl_easy_perform(easy)
        var status = 0
        _ = cc_info_long(easy, CURLINFO_RESPONSE_CODE, &status)
        // A streaming caller that stopped on purpose gets CURLE_WRITE_ERROR: that is success.
        guard code == CURLE_OK || (onData != nil && code == CURLE_WRITE_ERROR && status > 0) else {
            return .failure(BlockingHTTPError(message: String(cString: curl_easy_strerror(code))))
        }
        return .success((status, sink.body))
    }
}

/// Why a command-line request failed.
public struct BlockingHTTPError: Error, Sendable, CustomStringConvertible {
    /// libcurl's message.
    public let message: String
    public var description: String { message }
}
