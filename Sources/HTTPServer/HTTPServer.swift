import CLinux
import EventLoop
import Glibc
import Synchronization

/// The HTTP/1.1 server: one event loop per worker thread, each with its own SO_REUSEPORT
/// listener per TCP address (a Unix socket is one descriptor shared by all loops).
public final class HTTPServer: @unchecked Sendable {
    /// The configuration in force.
    public let configuration: ServerConfiguration
    private let shared: ServerShared
    private var loops: [(loop: EventLoop, server: LoopServer)] = []
    private var threads: [pthread_t] = []
    private var sharedListeners: [CInt] = []

    /// Creates a server; nothing is bound until `start`.
    public init(configuration: ServerConfiguration) {
        self.configuration = configuration
        shared = ServerShared(maxConnections: configuration.maxConnections)
    }

    /// Binds every address, starts the loops and returns the bound addresses (ports resolved).
    /// `makeHandler` is called once per loop, on the caller's thread.
    public func start(makeHandler: (EventLoop, Int) throws -> any HTTPHandler) throws -> [BindAddress] {
        let count = configuration.resolvedWorkers
        var perLoop: [[LoopServer.Listener]] = Array(repeating: [], count: count)
        var bound: [BindAddress] = []
        for (addressIndex, address) in configuration.addresses.enumerated() {
            switch address {
            case .tcp(let host, var port):
                // Held until this address listens: see `StartLock`.
                let lock = port == 0 ? nil : StartLock(port: port)
                if port != 0 { try Socket.probeExclusive(host: host, port: port) }
                for index in 0..<count {
                    let fd = try listening(.tcp(host: host, port: port), reusePort: true)
                    if port == 0 { port = try Socket.boundPort(fd) }
                    perLoop[index].append(.init(fd: fd, ownsDescriptor: true, address: addressIndex))
                }
                _ = consume lock
                bound.append(.tcp(host: host, port: port))
            case .unix(let path):
                try Socket.clearStaleUnixSocket(path)
                let fd = try listening(address, reusePort: false)
                sharedListeners.append(fd)
                for index in 0..<count {
                    perLoop[index].append(.init(fd: fd, ownsDescriptor: false, address: addressIndex))
                }
                bound.append(address)
            }
        }
        for index in 0..<count {
            let loop = try EventLoop(name: "loop-\(index)")
            let server = LoopServer(
                loop: loop, configuration: configuration, shared: shared,
                listeners: perLoop[index], handler: try makeHandler(loop, index))
            try server.start()
            loops.append((loop, server))
        }
        let shared = shared
        for (loop, _) in loops {
            threads.append(
                try Threads.spawn {
                    loop.run()
                    shared.finishedLoops.add(1, ordering: .releasing)
                })
        }
        return bound
    }

    /// A listening socket, or a `ListenError` naming the address.
    private func listening(_ address: BindAddress, reusePort: Bool) throws(ListenError) -> CInt {
        do { return try Socket.listen(address, reusePort: reusePort) } catch {
            throw ListenError.cannotBind(address, error)
        }
    }

    /// The event loops, in worker order.
    public var eventLoops: [EventLoop] { loops.map(\.loop) }

    /// Open client connections across all loops.
    public var openConnections: Int { shared.openConnections.load(ordering: .relaxed) }

    /// Stops accepting; idle connections close, busy ones after their current response.
    public func beginShutdown() {
        for (loop, server) in loops {
            nonisolated(unsafe) let server = server
            loop.execute { server.shutdown() }
        }
    }

    /// Closes every remaining connection, stops the loops and joins their threads. A loop that
    /// has not stopped within `seconds` (stuck in a call that never returns) is left behind, and
    /// the answer is false: the caller exits rather than wait for ever (waiting, a SIGTERM would
    /// never end the process, and a second one would never be read).
    @discardableResult
    public func stop(within seconds: Double = 5) -> Bool {
        for (loop, server) in loops {
            nonisolated(unsafe) let server = server
            loop.execute {
                server.closeAll()
                loop.stop()
            }
        }
        let deadline = NanoTime.now().adding(seconds: seconds)
        while shared.finishedLoops.load(ordering: .acquiring) < threads.count, NanoTime.now() < deadline {
            usleep(2_000)
        }
        guard shared.finishedLoops.load(ordering: .acquiring) == threads.count else { return false }
        for thread in threads { pthread_join(thread, nil) }
        threads.removeAll()
        for fd in sharedListeners { closeDescriptor(fd) }
        sharedListeners.removeAll()
        return true
    }
}
