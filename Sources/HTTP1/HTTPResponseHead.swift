/// A response head to serialise: status line plus fields, in order.
public struct HTTPResponseHead: Sendable {
    /// Status code, e.g. 200.
    public var status: Int
    /// Header fields in order; the serialiser adds nothing on its own.
    public var headers: [(name: String, value: String)]

    /// Creates a head.
    public init(status: Int, headers: [(name: String, value: String)] = []) {
        self.status = status
        self.headers = headers
    }

    /// Appends `HTTP/1.1 <status> <reason>\r\n`, the fields and the blank line to `buffer`.
    public func serialize(into buffer: inout [UInt8]) {
        Self.appendStatusLine(status, to: &buffer)
        for (name, value) in headers { buffer.writeField(name, value) }
        buffer.write(HTTPFieldSyntax.crlf)
    }

    /// Appends `HTTP/1.1 <status> <reason>\r\n`: the digits and a literal reason phrase, so no
    /// table is looked up and no shared array is retained per response.
    @inlinable
    public static func appendStatusLine<Sink: ByteSink>(_ status: Int, to bytes: inout Sink) {
        bytes.write(versionPrefix)
        if status >= 0 { bytes.writeDecimal(status) } else { bytes.write(String(status)) }
        bytes.write(byte: UInt8(ascii: " "))
        bytes.write(reasonPhrase(status))
        bytes.write(HTTPFieldSyntax.crlf)
    }

    @usableFromInline static let versionPrefix = StaticBytes("HTTP/1.1 ")

    /// The RFC 9110 reason phrase, or "Unknown".
    public static func reasonPhrase(_ status: Int) -> String {
        switch status {
        case 100: "Continue"
        case 101: "Switching Protocols"
        case 200: "OK"
        case 201: "Created"
        case 202: "Accepted"
        case 204: "No Content"
        case 206: "Partial Content"
        case 301: "Moved Permanently"
        case 302: "Found"
        case 303: "See Other"
        case 304: "Not Modified"
        case 307: "Temporary Redirect"
        case 308: "Permanent Redirect"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 408: "Request Timeout"
        case 409: "Conflict"
        case 413: "Content Too Large"
        case 414: "URI Too Long"
        case 415: "Unsupported Media Type"
        case 417: "Expectation Failed"
        case 422: "Unprocessable Content"
        case 426: "Upgrade Required"
        case 429: "Too Many Requests"
        case 431: "Request Header Fields Too Large"
        case 500: "Internal Server Error"
        case 501: "Not Implemented"
        case 502: "Bad Gateway"
        case 503: "Service Unavailable"
        case 504: "Gateway Timeout"
        case 505: "HTTP Version Not Supported"
        case 508: "Loop Detected"
        default: "Unknown"
        }
    }
}
