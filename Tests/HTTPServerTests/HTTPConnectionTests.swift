import EventLoop
import Glibc
import HTTP1
import Testing

@testable import HTTPServer

/// The number of times `needle` occurs in `text`.
private func occurrences(of needle: String, in text: String) -> Int {
    text.ranges(of: needle).count
}

@Suite("HTTPConnection over a socketpair")
struct HTTPConnectionTests {
    @Test("pipelined requests in one segment are answered in order on the same connection")
    func pipelining() throws {
        let h = try ConnectionHarness()
        var served = 0
        h.handler.onHandle = { exchange in
            served += 1
            exchange.respond(status: 200, headers: [("X-N", String(served))], body: Array(exchange.head.target.utf8))
        }
        try h.send(
            "GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\nGET /c HTTP/1.1\r\nHost: x\r\n\r\n")
        let text = h.read()
        #expect(occurrences(of: "HTTP/1.1 200", in: text) == 3)
        let a = try #require(text.firstRange(of: "X-N: 1")), b = try #require(text.firstRange(of: "X-N: 2"))
        let c = try #require(text.firstRange(of: "X-N: 3"))
        #expect(a.lowerBound < b.lowerBound && b.lowerBound < c.lowerBound)
        #expect(text.hasSuffix("/c"))
        #expect(h.handler.outcomes.map(\.ending) == [.completed, .completed, .completed])
        #expect(h.sawEOF == false)
        #expect(h.server.connectionCount == 1)
    }

    @Test(
        "a response whose last byte is queued from an upstream callback leaves at once, in one write; a partial or streamed one waits for the loop"
    )
    func completedResponseLeavesBeforeTheIterationEnds() throws {
        let h = try ConnectionHarness()
        h.handler.onHandle = { _ in }
        try h.send("GET /a HTTP/1.1\r\nHost: x\r\n\r\n")
        let exchange = try #require(h.handler.handled.first)
        // As the proxy does from libcurl's callbacks, outside the connection's own event:
        exchange.startResponse(status: 200, headers: [], framing: .length(5))
        Array("hel".utf8).withUnsafeBytes { exchange.writeBody($0) }
        #expect(h.read().isEmpty, "nothing leaves before the body is complete")
        Array("lo".utf8).withUnsafeBytes { exchange.writeBody($0) }
        // No loop turn yet: the client already has the whole response (the completion that
        // follows, such as the access log, runs after it left).
        let text = h.read()
        #expect(text.hasPrefix("HTTP/1.1 200"))
        #expect(text.hasSuffix("\r\n\r\nhello"))
        exchange.endResponse()
        h.run()
        #expect(h.read().isEmpty)
        #expect(h.handler.outcomes.map(\.ending) == [.completed])

        // A streamed (chunked) response is coalesced until the end of the loop iteration.
        try h.send("GET /b HTTP/1.1\r\nHost: x\r\n\r\n")
        let streamed = try #require(h.handler.handled.last)
        streamed.startResponse(status: 200, headers: [], framing: .streamed)
        Array("chunk".utf8).withUnsafeBytes { streamed.writeBody($0) }
        [UInt8](repeating: UInt8(ascii: "z"), count: 4010).withUnsafeBytes { streamed.writeBody($0) }
        #expect(h.read().isEmpty)
        h.run()
        #expect(h.read().contains("5\r\nchunk\r\nfaa\r\nzzz"))
        streamed.endResponse()
        h.run()
        #expect(h.read().hasSuffix("0\r\n\r\n"))
    }

    @Test("a closed connection is released while its exchange is still held, also with a flush still queued")
    func closedConnectionIsReleased() throws {
        let h = try ConnectionHarness()
        h.handler.onHandle = { _ in }
        try h.send("GET /a HTTP/1.1\r\nHost: x\r\n\r\n")
        let exchange = try #require(h.handler.handled.first)
        weak let connection = exchange.connection
        #expect(connection != nil)
        // A streamed write from outside the connection's event queues a flush for the loop's
        // next after-events turn; the connection closes before that turn comes.
        exchange.startResponse(status: 200, headers: [], framing: .streamed)
        Array("chunk".utf8).withUnsafeBytes { exchange.writeBody($0) }
        h.server.closeAll()
        #expect(exchange.connection == nil, "the exchange let go of its connection")
        h.run()
        #expect(connection == nil, "nothing holds the closed connection once the queued flush ran")
        #expect(h.handler.outcomes.map(\.ending) == [.aborted("shutdown_deadline")])
    }

    @Test("a pipelined request waits for the response to the one before it")
    func pipelinedRequestWaitsForResponse() throws {
        let h = try ConnectionHarness()
        h.handler.onHandle = { _ in }
        try h.send("GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(h.handler.handled.count == 1)
        h.handler.onHandle = { $0.respond(status: 204, headers: [], body: []) }
        h.handler.handled[0].respond(status: 200, headers: [], body: Array("first".utf8))
        h.run()
        #expect(h.handler.handled.count == 2)
        let text = h.read()
        #expect(text.hasPrefix("HTTP/1.1 200"))
        #expect(occurrences(of: "HTTP/1.1 204", in: text) == 1)
    }

    @Test("an early response drains the rest of the body without delivering it, then serves the next request")
    func earlyResponseDrainsBody() throws {
        let h = try ConnectionHarness()
        let delegate = RecordingDelegate()
        h.handler.onHandle = { exchange in
            if exchange.head.target == "/upload" {
                exchange.delegate = delegate
                exchange.respond(status: 403, headers: [], body: Array("no".utf8))
            } else {
                exchange.respond(status: 200, headers: [], body: Array("next".utf8))
            }
        }
        try h.send("POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabcde")
        #expect(h.read().hasPrefix("HTTP/1.1 403"))
        try h.send("fghijGET /after HTTP/1.1\r\nHost: x\r\n\r\n")
        let text = h.read()
        #expect(text.hasPrefix("HTTP/1.1 200"))
        #expect(text.hasSuffix("next"))
        #expect(delegate.body.isEmpty)
        #expect(delegate.finished.map(\.ending) == [.completed])
        #expect(h.handler.outcomes.count == 2)
        #expect(h.sawEOF == false)
    }

    @Test("a streamed request body reaches the delegate in order, then its end; bytes in are counted")
    func bodyDelivery() throws {
        let h = try ConnectionHarness()
        let delegate = RecordingDelegate()
        delegate.onBodyEnd = { exchange in exchange.respond(status: 200, headers: [], body: []) }
        h.handler.onHandle = { $0.delegate = delegate }
        try h.send("POST /u HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
        #expect(delegate.bodyEnded == 0)
        try h.send("6\r\n world\r\n0\r\n\r\n")
        #expect(String(decoding: delegate.body, as: UTF8.self) == "hello world")
        #expect(delegate.bodyEnded == 1)
        #expect(h.read().hasPrefix("HTTP/1.1 200"))
        #expect(h.handler.outcomes.first?.bytesIn == 11)
    }

    @Test("a paused body stays in the socket until resumed")
    func pausedBody() throws {
        let h = try ConnectionHarness()
        let delegate = RecordingDelegate()
        h.handler.onHandle = { exchange in
            exchange.delegate = delegate
            exchange.pauseBody()
        }
        try h.send("POST /u HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nbody")
        #expect(delegate.body.isEmpty)
        h.handler.handled[0].resumeBody()
        h.run()
        #expect(String(decoding: delegate.body, as: UTF8.self) == "body")
        #expect(delegate.bodyEnded == 1)
    }

    @Test("client FIN while the response is pending closes at once and reports client_closed with no status")
    func finWhilePending() throws {
        let h = try ConnectionHarness()
        let delegate = RecordingDelegate()
        h.handler.onHandle = { $0.delegate = delegate }
        try h.send("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(h.handler.outcomes.isEmpty)
        h.finish()
        #expect(h.handler.outcomes.map(\.ending) == [.clientClosed("client_closed")])
        #expect(h.handler.outcomes.first?.status == 0)
        #expect(delegate.finished.map(\.ending) == [.clientClosed("client_closed")])
        #expect(h.handler.handled[0].isAborted)
        #expect(h.handler.handled[0].delegate == nil)
        _ = h.read()
        #expect(h.sawEOF)
        #expect(h.server.connectionCount == 0)
    }

    @Test("client FIN in the middle of a request body is client_closed_mid_request")
    func finMidBody() throws {
        let h = try ConnectionHarness()
        h.handler.onHandle = { _ in }
        try h.send("POST /u HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nabc")
        h.finish()
        #expect(h.handler.outcomes.map(\.ending) == [.clientClosed("client_closed_mid_request")])
        #expect(h.handler.outcomes.first?.bytesIn == 3)
    }

    @Test("backpressure: a refused writer hears writable once the client read enough")
    func backpressure() throws {
        let h = try ConnectionHarness(sendBuffer: 16384)
        let delegate = RecordingDelegate()
        let chunk = [UInt8](repeating: UInt8(ascii: "x"), count: 32768)
        var refusedAfter = 0
        h.handler.onHandle = { exchange in
            exchange.delegate = delegate
            exchange.startResponse(status: 200, headers: [], framing: .streamed)
            while exchange.canWrite {
                chunk.withUnsafeBytes { exchange.writeBody($0) }
                refusedAfter += chunk.count
            }
        }
        try h.send("GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(refusedAfter >= 256 * 1024)
        #expect(delegate.writable == 0)
        var read = 0
        for _ in 0..<200 where delegate.writable == 0 {
            read += h.drain()
            h.run(turns: 1)
        }
        #expect(delegate.writable == 1)
        // Writable means the queue fell under the low-water mark (64 KiB): apart from that and
        // what the socket buffers hold, the body reached the client.
        #expect(read >= refusedAfter - 128 * 1024)
        h.handler.handled[0].endResponse()
        h.run()
        _ = h.drain()
        #expect(h.handler.outcomes.map(\.ending) == [.completed])
    }

    @Test("a writer with its own limit is refused at it, counts what waits, and hears writable as the queue drains")
    func backpressureBelowALimit() throws {
        let h = try ConnectionHarness(sendBuffer: 16384)
        let delegate = RecordingDelegate()
        let chunk = [UInt8](repeating: UInt8(ascii: "x"), count: 4096)
        let limit = 16 * 1024
        var queuedWhenRefused = 0
        h.handler.onHandle = { exchange in
            exchange.delegate = delegate
            exchange.startResponse(status: 200, headers: [], framing: .streamed)
        }
        try h.send("GET /events HTTP/1.1\r\nHost: x\r\n\r\n")
        let exchange = h.handler.handled[0]
        // Written outside the request's own event, as events are: flushed at the end of each turn.
        for _ in 0..<200 {
            guard exchange.canWrite(below: limit) else { break }
            chunk.withUnsafeBytes { exchange.writeBody($0) }
            h.run(turns: 1)
        }
        queuedWhenRefused = exchange.queuedBytes
        #expect(queuedWhenRefused >= limit)
        #expect(!exchange.canWrite(below: limit))
        #expect(delegate.writable == 0)
        for _ in 0..<200 where delegate.writable == 0 {
            _ = h.drain()
            h.run(turns: 1)
        }
        #expect(delegate.writable >= 1)
        #expect(exchange.queuedBytes < queuedWhenRefused)
        exchange.endResponse()
        h.run()
        _ = h.drain()
        #expect(h.handler.outcomes.map(\.ending) == [.completed])
        #expect(exchange.queuedBytes == 0)
    }

    @Test("a response none of whose bytes left is retracted and replaced by an error")
    func retractBeforeAnyByteLeft() throws {
        let h = try ConnectionHarness()
        h.handler.onHandle = { exchange in
            exchange.startResponse(status: 200, headers: [], framing: .length(100))
            #expect(exchange.retractResponse())
            exchange.respond(status: 502, headers: [], body: Array("bad gateway".utf8))
        }
        try h.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        let text = h.read()
        #expect(text.hasPrefix("HTTP/1.1 502"))
        #expect(occurrences(of: "HTTP/1.1", in: text) == 1)
        #expect(h.handler.outcomes.map(\.status) == [502])
    }

    @Test("a response cut short after bytes left: head and partial body are flushed, then the close, with the reason")
    func abortAfterBytesLeft() throws {
        let h = try ConnectionHarness()
        h.handler.onHandle = { exchange in
            exchange.startResponse(status: 200, headers: [], framing: .length(100))
            Array("abc".utf8).withUnsafeBytes { exchange.writeBody($0) }
        }
        try h.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        let exchange = h.handler.handled[0]
        #expect(exchange.retractResponse() == false)
        exchange.abort(reason: "upstream_failed_mid_response")
        h.run()
        let text = h.read()
        #expect(text.hasPrefix("HTTP/1.1 200"))
        #expect(text.hasSuffix("\r\n\r\nabc"))
        #expect(h.sawEOF)
        #expect(h.handler.outcomes.map(\.ending) == [.aborted("upstream_failed_mid_response")])
        #expect(h.handler.outcomes.first?.bytesOut == 3)
    }

    @Test("a malformed head is refused with the handler's rendering and no exchange, then closed")
    func malformedHeadRefused() throws {
        let h = try ConnectionHarness()
        try h.send("GET / HTTP/1.1\r\nHost: x\r\nBad Header: y\r\n\r\n")
        let text = h.read()
        #expect(text.hasPrefix("HTTP/1.1 400 Refused"))
        #expect(h.sawEOF)
        #expect(h.handler.refusals.count == 1)
        #expect(h.handler.refusals.first?.hadExchange == false)
        #expect(h.handler.handled.isEmpty)
    }

    @Test("a declared body over the limit is refused before the handler sees it and reported as refused")
    func bodyTooLargeRefused() throws {
        var configuration = ServerConfiguration()
        configuration.maxBodyBytes = 10
        let h = try ConnectionHarness(configuration: configuration)
        try h.send("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\n")
        #expect(h.read().hasPrefix("HTTP/1.1 413 Refused"))
        #expect(h.handler.handled.isEmpty)
        #expect(h.handler.refusals.first?.hadExchange == true)
        #expect(h.handler.outcomes.map(\.ending) == [.refused("body_too_large")])
        #expect(h.handler.outcomes.first?.status == 413)
    }

    @Test("Expect 100-continue: the interim response is written after handle unless the handler answered")
    func expectContinue() throws {
        let h = try ConnectionHarness()
        h.handler.onHandle = { _ in }
        try h.send("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n")
        #expect(h.read() == "HTTP/1.1 100 Continue\r\n\r\n")
    }

    @Test("HTTP/1.0 without a length: the body ends with the connection")
    func closeDelimitedResponse() throws {
        let h = try ConnectionHarness()
        h.handler.onHandle = { exchange in
            exchange.startResponse(status: 200, headers: [], framing: .streamed)
            Array("stream".utf8).withUnsafeBytes { exchange.writeBody($0) }
            exchange.endResponse()
        }
        try h.send("GET / HTTP/1.0\r\n\r\n")
        let text = h.read()
        #expect(text.contains("Connection: close\r\n"))
        #expect(!text.contains("Transfer-Encoding"))
        #expect(text.hasSuffix("\r\n\r\nstream"))
        #expect(h.sawEOF)
    }

    @Test("HTTP/1.0 asking to keep the connection is told it is kept, and is served again on it")
    func http10KeepAlive() throws {
        let h = try ConnectionHarness()
        h.handler.onHandle = { exchange in exchange.respond(status: 200, headers: [], body: Array("ok".utf8)) }
        try h.send("GET /a HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        let first = h.read()
        #expect(first.contains("Connection: keep-alive\r\n") && first.hasSuffix("\r\n\r\nok"))
        try h.send("GET /b HTTP/1.0\r\n\r\n")
        let second = h.read()
        #expect(second.contains("Connection: close\r\n") && !second.contains("keep-alive"))
        #expect(h.handler.handled.count == 2)
        // HTTP/1.1 keeps the connection without saying so.
        let h11 = try ConnectionHarness()
        h11.handler.onHandle = { exchange in exchange.respond(status: 200, headers: [], body: []) }
        try h11.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(!h11.read().contains("Connection:"))
    }

    @Test("more body than the declared Content-Length is cut and reported as truncated")
    func overlongBodyTruncated() throws {
        let h = try ConnectionHarness()
        h.handler.onHandle = { exchange in
            exchange.startResponse(status: 200, headers: [], framing: .length(3))
            Array("abcdef".utf8).withUnsafeBytes { exchange.writeBody($0) }
            exchange.endResponse()
        }
        try h.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(h.read().hasSuffix("\r\n\r\nabc"))
        #expect(h.handler.outcomes.map(\.ending) == [.truncated])
        #expect(h.handler.outcomes.first?.bytesOut == 3)
    }
}

@Suite("writeDecimal and writeHexadecimal")
struct AppendDecimalTests {
    @Test(
        "a Content-Length is written in decimal digits, as String(_:) would",
        arguments: [0, 7, 9, 10, 99, 100, 65_536, 123_456_789, Int.max])
    func digits(value: Int) {
        var bytes = Array("x".utf8)
        bytes.writeDecimal(value)
        #expect(bytes == Array("x\(value)".utf8))
    }

    @Test(
        "a chunk size is written in lowercase hexadecimal, as String(_:radix: 16) would",
        arguments: [0, 9, 10, 15, 16, 255, 4010, 65_536, 0xabcdef, Int.max])
    func hexadecimal(value: Int) {
        var bytes = Array("x".utf8)
        bytes.writeHexadecimal(value)
        #expect(bytes == Array("x\(String(value, radix: 16))".utf8))
    }
}
