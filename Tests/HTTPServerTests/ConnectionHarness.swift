import EventLoop
import Glibc
import HTTP1

@testable import HTTPServer

/// An `HTTPConnection` served over a socketpair on a loop the test drives turn by turn, in the
/// manner of swift-nio's `EmbeddedChannel`: write client bytes, run the loop, read what the
/// server wrote. Everything runs on the test's thread; nothing listens on a port.
final class ConnectionHarness {
    let loop: EventLoop
    let handler = RecordingHandler()
    let server: LoopServer
    /// The client's end of the socketpair (non-blocking).
    private(set) var client: CInt
    /// Everything the client read so far.
    private(set) var received: [UInt8] = []
    /// Whether the client read the end of the stream (the server closed).
    private(set) var sawEOF = false

    /// A served connection; `sendBuffer` shrinks the server's socket send buffer (backpressure tests).
    init(configuration: ServerConfiguration = ServerConfiguration(), sendBuffer: CInt? = nil) throws {
        loop = try EventLoop(name: "harness")
        server = LoopServer(
            loop: loop, configuration: configuration,
            shared: ServerShared(maxConnections: configuration.maxConnections),
            listeners: [], handler: handler)
        var fds: [CInt] = [-1, -1]
        let kind = CInt(SOCK_STREAM.rawValue) | CInt(SOCK_NONBLOCK.rawValue) | CInt(SOCK_CLOEXEC.rawValue)
        guard socketpair(AF_UNIX, kind, 0, &fds) == 0 else { throw HarnessError.socketpair(errno) }
        if var size = sendBuffer {
            setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &size, socklen_t(MemoryLayout<CInt>.size))
            setsockopt(fds[1], SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<CInt>.size))
        }
        client = fds[1]
        server.admit(fd: fds[0], peer: "unix", listener: 0)
    }

    deinit {
        server.closeAll()
        if client >= 0 { close(client) }
    }

    enum HarnessError: Error { case socketpair(CInt), write(CInt) }

    /// Writes `text` from the client and runs the loop until it is quiet.
    func send(_ text: String) throws {
        try send(Array(text.utf8))
    }

    func send(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { write(client, $0.baseAddress, $0.count) }
            if n < 0 {
                guard errno == EAGAIN else { throw HarnessError.write(errno) }
                run()
                continue
            }
            offset += n
        }
        run()
    }

    /// Shuts down the client's sending side (a FIN) and runs the loop.
    func finish() {
        shutdown(client, CInt(SHUT_WR))
        run()
    }

    /// Runs loop turns until one dispatches nothing new (at most `turns`).
    func run(turns: Int = 8) {
        for _ in 0..<turns { loop.runOnce(timeoutMilliseconds: 0) }
    }

    /// Reads what the server wrote so far (without blocking) and returns everything read since the last call.
    @discardableResult
    func read() -> String {
        let start = received.count
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = chunk.withUnsafeMutableBytes { Glibc.read(client, $0.baseAddress, $0.count) }
            if n > 0 {
                received.append(contentsOf: chunk[0..<n])
                continue
            }
            if n == 0 { sawEOF = true }
            break
        }
        return String(decoding: received[start...], as: UTF8.self)
    }

    /// Reads and discards what is available, returning the byte count.
    func drain() -> Int {
        var total = 0
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = chunk.withUnsafeMutableBytes { Glibc.read(client, $0.baseAddress, $0.count) }
            if n > 0 { total += n; continue }
            if n == 0 { sawEOF = true }
            return total
        }
    }
}

/// A handler that records what the server tells it; `onHandle` decides the answer.
final class RecordingHandler: HTTPHandler {
    var onHandle: (HTTPExchange) -> Void = { $0.respond(status: 200, headers: [], body: Array("ok".utf8)) }
    private(set) var handled: [HTTPExchange] = []
    private(set) var outcomes: [ExchangeOutcome] = []
    private(set) var refusals: [(refusal: HTTPRefusal, hadExchange: Bool)] = []

    func handle(_ exchange: HTTPExchange) {
        handled.append(exchange)
        onHandle(exchange)
    }

    func finished(_ exchange: HTTPExchange, outcome: ExchangeOutcome) { outcomes.append(outcome) }

    func refusal(_ refusal: HTTPRefusal, exchange: HTTPExchange?, peer: String) -> [UInt8] {
        refusals.append((refusal, exchange != nil))
        let body = "refused \(refusal.code)"
        return Array(
            "HTTP/1.1 \(refusal.status) Refused\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)"
                .utf8)
    }

    func shutdown() {}
}

/// A delegate that records the exchange's events.
final class RecordingDelegate: HTTPExchangeDelegate {
    private(set) var body: [UInt8] = []
    private(set) var bodyEnded = 0
    private(set) var writable = 0
    private(set) var finished: [ExchangeOutcome] = []
    var onBodyEnd: ((HTTPExchange) -> Void)?
    var onWritable: ((HTTPExchange) -> Void)?

    func exchange(_ exchange: HTTPExchange, receivedBody bytes: UnsafeRawBufferPointer) {
        body.append(contentsOf: bytes)
    }
    func exchangeBodyEnded(_ exchange: HTTPExchange) {
        bodyEnded += 1
        onBodyEnd?(exchange)
    }
    func exchangeWritable(_ exchange: HTTPExchange) {
        writable += 1
        onWritable?(exchange)
    }
    func exchange(_ exchange: HTTPExchange, finished outcome: ExchangeOutcome) { finished.append(outcome) }
}
