import EventLoop
import Glibc
import Testing

@testable import HTTPServer

@Suite("HTTPServer.stop")
struct HTTPServerStopTests {
    private func started(workers: Int) throws -> HTTPServer {
        var configuration = ServerConfiguration()
        configuration.addresses = [.tcp(host: "127.0.0.1", port: 0)]
        configuration.workers = workers
        let server = HTTPServer(configuration: configuration)
        _ = try server.start { _, _ in RecordingHandler() }
        return server
    }

    @Test("stops and joins every loop")
    func stopsEveryLoop() throws {
        let server = try started(workers: 2)
        #expect(server.stop(within: 5))
    }

    @Test("a loop stuck in a call that never returns is left behind within the bound, not waited for")
    func leavesAStuckLoop() throws {
        let server = try started(workers: 2)
        // The loop's thread sleeps past the bound; it stops once it wakes (the test process goes on).
        server.eventLoops[1].execute { sleep(3) }
        usleep(100_000)
        let started = NanoTime.now()
        #expect(!server.stop(within: 0.5))
        #expect(NanoTime.now().seconds(since: started) < 2)
    }
}
