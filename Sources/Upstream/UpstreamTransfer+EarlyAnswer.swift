import Glibc

/// An upstream that answers early (a 401, a 413, a 200) and closes without reading the request
/// body resets the connection, and libcurl's next send of the body fails; libcurl 7.88 then ends
/// the transfer with "Send failure" without reading the answer, which the kernel still holds (a
/// reset drops what was to be sent, not what arrived). RFC 9112 §9.5: a client that sees such an
/// answer stops sending the body, and the answer is what the client should get. So when libcurl
/// closes a plain HTTP connection that carried a request awaiting its head with a body going up,
/// what the connection holds unread is kept for the transfer (`UpstreamClient.keepEarlyAnswer`),
/// and if the transfer then fails on a send, a whole answer read from it is relayed as libcurl
/// would have: its head through `receivedHeader`, its body through `received`.
///
/// A whole answer is a final head and, by its framing, its body: a `Content-Length` with that many
/// bytes, a status without a body, or the bytes up to the connection's end when they were all
/// read (not when the kept bytes filled up before it). A chunked answer, one
/// libcurl would have decoded (`UpstreamRequest.decodesContent`), one cut short, and every answer
/// over TLS (the bytes are encrypted, and OpenSSL's state went with the connection) stay the
/// failure they were. This works with libcurl's calls as glibc answers them; with the libcurl
/// tuning on, its `send` lets libcurl read such an answer itself, over TLS too.
extension UpstreamTransfer {
    /// Bytes kept of an early answer at most.
    static let earlyAnswerLimit = 64 * 1024

    /// Whether an answer that came on this transfer's connection now is one libcurl may fail to
    /// read: no head yet, a body to send, plain HTTP.
    var awaitsEarlyAnswer: Bool { headAwaited && sendsBodyInPlainHTTP }

    /// Relays `bytes`, the answer kept from the closed connection, if they hold a whole answer
    /// (the type's comment says which); true when the transfer ended with it.
    func relayEarlyAnswer(_ bytes: [UInt8]) -> Bool {
        earlyAnswer = nil
        guard awaitsEarlyAnswer,
            let framing = Self.frame(bytes, decodes: decodesContentCoding, reachesEnd: earlyAnswerReachesEnd)
        else { return false }
        var copy = bytes
        return copy.withUnsafeMutableBytes { raw in
            let base = raw.baseAddress!.assumingMemoryBound(to: CChar.self)
            var start = 0
            while start < framing.headEnd {
                var end = start
                while raw[end] != 0x0A { end += 1 }
                let length = end + 1 - start
                guard receivedHeader(base + start, length) == length else {
                    // Refused (too many fields, folding, ...), as libcurl's own reading would be.
                    finish(.unreachable(refusedHead ?? "the upstream's early answer could not be read"))
                    return true
                }
                start = end + 1
            }
            guard !headAwaited else { return false }
            if framing.body.count > 0 {
                let length = framing.body.count
                if received(base + framing.body.lowerBound, length) != length {
                    finish(.unreachable("the upstream's early answer could not be relayed whole"))
                    return true
                }
            }
            finish(nil)
            return true
        }
    }

    /// Where `bytes` end their final head (after its blank line) and where its body lies, if they
    /// hold a whole answer that needs no decoding. `reachesEnd`: the bytes go up to the
    /// connection's end; without it, an answer framed by that end is not known to be whole.
    static func frame(_ bytes: [UInt8], decodes: Bool, reachesEnd: Bool) -> (headEnd: Int, body: Range<Int>)? {
        var head = UpstreamResponseHead(status: 0)
        var start = 0
        var headEnd: Int?
        bytes.withUnsafeBytes { raw in
            while start < raw.count {
                var end = start
                while end < raw.count && raw[end] != 0x0A { end += 1 }
                guard end < raw.count else { return }
                let line = head.read(line: UnsafeRawBufferPointer(rebasing: raw[start...end]))
                start = end + 1
                if line == .end && head.status >= 200 {
                    headEnd = start
                    return
                }
            }
        }
        guard let headEnd, head.status >= 200, !head.hasTransferEncoding, head.contentLengthsAgree,
            head.contentLengthReadable, !(decodes && head.isContentEncoded)
        else { return nil }
        let rest = bytes.count - headEnd
        if head.status == 204 || head.status == 304 { return (headEnd, headEnd..<headEnd) }
        if let length = head.contentLength {
            guard length <= rest else { return nil }
            return (headEnd, headEnd..<headEnd + length)
        }
        // Framed by the connection's end: whole only if the bytes reach it (more than the kept
        // bytes would be relayed cut short, as if complete).
        guard reachesEnd else { return nil }
        return (headEnd, headEnd..<bytes.count)
    }
}
