import HTTP1

extension UpstreamResponseHead {
    /// What one header line was.
    enum Line: Equatable {
        /// The blank line ending a head (a final one when `status >= 200`; 1xx heads are dropped).
        case end
        /// `HTTP/x NNN reason`: a new head begins (fields forgotten; status 0 unless three digits).
        case statusLine
        /// A field, appended.
        case field
        /// A line that is no field a proxy may relay (a bad name, CR/LF/NUL in the value).
        case dropped
        /// A continuation line (obsolete line folding): the field before it is not whole, so the
        /// response is not relayed (RFC 9112 §5.2 lets a proxy answer 502 instead).
        case folded
        /// A `Content-Length` or `Transfer-Encoding` field whose value holds a CR, LF or NUL: it
        /// cannot be dropped like another field, since libcurl still frames the body by it (it
        /// reads a length up to the first byte that is no digit), and the client would get the
        /// body framed by another length than the one libcurl read. The response is not relayed.
        case unreadableFraming
    }

    /// Reads one header line as libcurl hands it over (with its CRLF or LF) into the head: a
    /// pure function of the line and the head so far, tested without a transfer.
    mutating func read(line: UnsafeRawBufferPointer) -> Line {
        var end = line.count
        while end > 0 && (line[end - 1] == 0x0A || line[end - 1] == 0x0D) { end -= 1 }
        if end == 0 { return .end }
        if end >= 10 && line[0] == 0x48 && line[1] == 0x54 && line[2] == 0x54 && line[3] == 0x50 && line[4] == 0x2F {
            // "HTTP/1.1 NNN reason" or curl's "HTTP/2 NNN" for HTTP/2: a new response head begins.
            var i = 5
            while i < end && line[i] != 0x20 { i += 1 }
            var status = 0, digits = 0
            i += 1
            while i < end, digits < 4, line[i] &- 0x30 < 10 {
                status = status * 10 + Int(line[i] &- 0x30)
                digits += 1
                i += 1
            }
            // Exactly three digits, 100…599 (RFC 9110 §15: others are invalid, to be handled as a
            // 5xx); anything else is no status a proxy can relay (curl lets e.g.
            // "HTTP/2 99999999999999" through on HTTP/1 connections): the transfer ends without a
            // head, a 502.
            reset(status: digits == 3 && status >= 100 && status <= 599 ? status : 0)
            return .statusLine
        }
        // A continuation line (obsolete line folding) is reported: relaying the field before it
        // cut short would drop what it continues (a Connection list, a cookie's attributes).
        if line[0] == 0x20 || line[0] == 0x09 { return .folded }
        // A field whose name is not a token or that holds a CR, LF or NUL is dropped: nothing
        // relayed may bend the client's response.
        // One pass each for the name and the value, rather than a `memchr` per byte looked for:
        // the value eight bytes at a time up to each control byte (a tab is one, and allowed).
        let bytes = UnsafeBufferPointer(start: line.baseAddress?.assumingMemoryBound(to: UInt8.self), count: end)
        var colon = 0
        while colon < end && ByteClass.isToken(bytes[colon]) { colon += 1 }
        guard colon > 0, colon < end, bytes[colon] == 0x3A else { return .dropped }
        var i = colon + 1
        while true {
            i = ByteScan.nextControlByte(bytes, from: i)
            guard i < end else { break }
            if bytes[i] == 0x0D || bytes[i] == 0x0A || bytes[i] == 0 {
                switch FieldRole(name: UnsafeBufferPointer(rebasing: bytes[..<colon])) {
                case .contentLength, .transferEncoding: return .unreadableFraming
                case .endToEnd, .connection, .hopByHop: return .dropped
                }
            }
            i += 1
        }
        var valueStart = colon + 1
        while valueStart < end && (line[valueStart] == 0x20 || line[valueStart] == 0x09) { valueStart += 1 }
        var valueEnd = end
        while valueEnd > valueStart && (line[valueEnd - 1] == 0x20 || line[valueEnd - 1] == 0x09) { valueEnd -= 1 }
        append(line: line, nameEnd: colon, valueStart: valueStart, valueEnd: valueEnd)
        return .field
    }
}
