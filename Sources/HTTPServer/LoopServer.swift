import CLinux
import EventLoop
import Glibc
import Synchronization

/// State shared by all loops of one server: the connection count and the listeners' fate.
final class ServerShared: Sendable {
    let openConnections = Atomic<Int>(0)
    /// Loops whose `run` returned: `HTTPServer.stop` joins only threads that are done.
    let finishedLoops = Atomic<Int>(0)
    let maxConnections: Int

    init(maxConnections: Int) { self.maxConnections = maxConnections }
}

/// The per-loop half of the server: its listeners, its connections and its handler.
final class LoopServer: Selectable {
    let configuration: ServerConfiguration
    let loop: EventLoop
    let handler: any HTTPHandler
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
    /// Whether the listeners are read: accepting, paused after accept failures (EMFILE) until a
    /// backoff timer, or stopped for good (shutdown).
    private enum Accepting { case open, backingOff, stopped }
    private var accepting = Accepting.open
    /// Accept failures in a row, and when the next one may be logged.
    private var acceptFailures = 0
    private var nextAcceptFailureLog = NanoTime(nanoseconds: 0)
    /// Connection read buffers, lent while a connection has unread input.
    let inputBuffers = BufferPool(size: 8192, limit: 64)
    /// Connection write buffers, lent while a connection has unsent output.
    let outputBuffers = BufferPool(size: 16384, limit: 64)
    /// Connections' peak since the allocator was last asked to return free memory.
    private var peakConnections = 0
    private var trimScheduled = false
    init(
        loop: EventLoop, configuration: ServerConfiguration, shared: ServerShared,
        listeners: [Listener], handler: any HTTPHandler
    ) {
        self.loop = loop
        self.configuration = configuration
        self.shared = shared
        self.listeners = listeners
        self.handler = handler
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
                acceptFailures = 0
                admit(fd: fd, peer: peer, listener: listener.address)
            }
        }
    }

    /// Takes an accepted descriptor: refused past the connection limit, else served.
    func admit(fd: CInt, peer: String, listener: Int) {
        let open = shared.openConnections.add(1, ordering: .relaxed).newValue
        guard open <= shared.maxConnections, accepting != .stopped else {
            shared.openConnections.subtract(1, ordering: .relaxed)
            // The handler renders (and logs) the refusal. Best effort on a fresh socket: its send
            // buffer is empty, so the write does not block.
            var bytes = handler.refusal(.tooManyConnections, exchange: nil, peer: peer)
            _ = Glibc.write(fd, &bytes, bytes.count)
            closeDescriptor(fd)
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

    /// EMFILE and friends: stop accepting briefly (backing off up to a second while it lasts)
    /// instead of spinning on a readable listener; logged once per burst of failures, not per try.
    private func acceptFailed(_ error: IOError) {
        acceptFailures += 1
        if acceptFailures == 1 || loop.now >= nextAcceptFailureLog {
            Log.emit(.error, "accept_failed", ["error": .string(error.description), "failures": .int(acceptFailures)])
            nextAcceptFailureLog = loop.now.adding(seconds: 60)
        }
        guard accepting == .open else { return }
        accepting = .backingOff
        for listener in listeners { try? loop.reregister(fd: listener.fd, interest: []) }
        let pause = min(1.0, 0.1 * Double(1 << min(acceptFailures - 1, 4)))
        loop.schedule(at: NanoTime.now().adding(seconds: pause)) { [weak self] in
            guard let self, self.accepting == .backingOff else { return }
            self.accepting = .open
            for listener in self.listeners { try? self.loop.reregister(fd: listener.fd, interest: .read) }
        }
    }

    func connectionClosed(_ connection: HTTPConnection) {
        guard connections.removeValue(forKey: connection.fd) != nil else { return }
        shared.openConnections.subtract(1, ordering: .relaxed)
        peakConnections = max(peakConnections, connections.count + 1)
        // After a burst (most of the peak gone) hand free heap pages back to the kernel, at most
        // once a second: glibc keeps freed memory for reuse, so RSS would stay at the peak.
        if peakConnections >= 256, connections.count <= peakConnections / 4, !trimScheduled {
            trimScheduled = true
            loop.schedule(at: loop.now.adding(seconds: 1)) { [weak self] in
                guard let self else { return }
                self.trimScheduled = false
                self.peakConnections = self.connections.count
                cl_malloc_trim()
            }
        }
    }

    /// Stops accepting and lets connections finish their current exchange.
    func shutdown() {
        accepting = .stopped
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
