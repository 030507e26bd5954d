import CLinux
import Glibc
import Synchronization

/// State shared by all loops of one server: the connection count and the listeners' fate.
final class ServerShared: Sendable {
    let openConnections = Atomic<Int>(0)
    let maxConnections: Int

    init(maxConnections: Int) { self.maxConnections = maxConnections }
}

/// The per-loop half of the server: its listeners, its connections and its handler.
final class LoopServer: Selectable {
    let configuration: ServerConfiguration
    let loop: EventLoop
    let handler: any HTTPHandler
    var requestIDs: RequestIDGenerator
    private let shared: ServerShared
    /// One listening descriptor of this loop.
    struct Listener {
        /// The listening socket.
        let fd: CInt
        /// Whether this loop closes it (per-loop TCP listeners) or the server does (a shared Unix socket).
        let ownsDescriptor: Bool
        /// Index of its address in `ServerConfiguration.addresses`; exchanges carry it.
        let address: Int
    }
    private var listeners: [Listener]
    private var connections: [CInt: HTTPConnection] = [:]
    private var acceptPaused = false
    private var shuttingDown = false
    init(loop: EventLoop, index: Int, configuration: ServerConfiguration, shared: ServerShared,
         listeners: [Listener], handler: any HTTPHandler) {
        self.loop = loop
        self.configuration = configuration
        self.shared = shared
        self.listeners = listeners
        self.handler = handler
        requestIDs = RequestIDGenerator(loopIndex: index)
    }

    func start() throws(IOError) {
        for listener in listeners {
            // A descriptor shared by all loops (a Unix socket) wakes one loop per connection.
            try loop.register(fd: listener.fd, interest: .read, target: self, exclusive: !listener.ownsDescriptor)
        }
    }

    var connectionCount: Int { connections.count }

    /// A listener is readable: accept what is pending, a bounded batch per wake-up for fairness.
    func ready(_ events: UInt32) {
        for listener in listeners {
            for _ in 0..<64 {
                let accepted: (fd: CInt, peer: String)?
                do {
                    accepted = try Socket.accept(listener.fd)
                } catch {
                    acceptFailed(error)
                    return
                }
                guard let (fd, peer) = accepted else { break }
                admit(fd: fd, peer: peer, listener: listener.address)
            }
        }
    }

    private func admit(fd: CInt, peer: String, listener: Int) {
        let open = shared.openConnections.add(1, ordering: .relaxed).newValue
        guard open <= shared.maxConnections, !shuttingDown else {
            shared.openConnections.subtract(1, ordering: .relaxed)
            let requestID = requestIDs.next()
            let body = "{\"error\":\"too_many_connections\",\"message\":\"The proxy has too many open connections.\",\"requestID\":\"\(requestID)\"}"
            let response = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n"
                + "X-Request-ID: \(requestID)\r\nConnection: close\r\n\r\n" + body
            // Best effort on a fresh socket: its send buffer is empty, so the write does not block.
            var bytes = Array(response.utf8)
            _ = Glibc.write(fd, &bytes, bytes.count)
            closeDescriptor(fd)
            Log.emit(.warning, "connection_refused", ["reason": .string("max_connections"), "peer": .string(peer),
                                                      "requestID": .string(requestID)])
            return
        }
        if peer != "unix" { Socket.setNoDelay(fd) }
        let connection = HTTPConnection(fd: fd, peer: peer, listener: listener, loop: loop, owner: self)
        do {
            try connection.start()
            connections[fd] = connection
        } catch {
            shared.openConnections.subtract(1, ordering: .relaxed)
            closeDescriptor(fd)
        }
    }

    /// EMFILE and friends: stop accepting briefly instead of spinning on a readable listener.
    private func acceptFailed(_ error: IOError) {
        Log.emit(.error, "accept_failed", ["error": .string(error.description)])
        guard !acceptPaused else { return }
        acceptPaused = true
        for listener in listeners { try? loop.reregister(fd: listener.fd, interest: []) }
        loop.schedule(at: NanoTime.now().adding(seconds: 0.1)) { [weak self] in
            guard let self, !self.shuttingDown else { return }
            self.acceptPaused = false
            for listener in self.listeners { try? self.loop.reregister(fd: listener.fd, interest: .read) }
        }
    }

    func connectionClosed(_ connection: HTTPConnection) {
        guard connections.removeValue(forKey: connection.fd) != nil else { return }
        shared.openConnections.subtract(1, ordering: .relaxed)
    }

    /// Stops accepting and lets connections finish their current exchange.
    func shutdown() {
        shuttingDown = true
        handler.shutdown()
        for listener in listeners {
            loop.deregister(fd: listener.fd)
            if listener.ownsDescriptor { closeDescriptor(listener.fd) }
        }
        listeners.removeAll()
        for connection in Array(connections.values) { connection.shutdown() }
    }

    /// Closes whatever is still open (the shutdown deadline passed).
    func closeAll() {
        for connection in Array(connections.values) { connection.close(reason: "shutdown_deadline") }
    }
}
