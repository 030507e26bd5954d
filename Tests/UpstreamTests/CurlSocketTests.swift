// CCurl as well as Glibc for the socket names (see LoopbackPair.swift).
import CCurl
import EventLoop
import Glibc
import Testing

@testable import Upstream

/// The states of the table, each reached through events from a socket just made.
enum CurlSocketStart: String, CaseIterable, Sendable {
    /// Opened through `openSocket`, not watched yet.
    case opened
    /// Watched for writing only: connecting.
    case connecting
    /// Parked while connecting.
    case parkedConnecting
    /// Watched for reading: connected.
    case established
    /// Parked between transfers, no wait seen through yet.
    case parked
    /// Parked through a wait.
    case parkedQuiet
    /// Turned readable while parked.
    case spoiled
    /// Turned ready while parked before it connected.
    case spoiledUnproven
    /// curl's own socket (not opened through `openSocket`), watched for reading.
    case curlsOwn

    var opened: Bool { self != .curlsOwn }

    var path: [CurlSocketEvent] {
        switch self {
        case .opened: []
        case .connecting: [.watchWrite]
        case .parkedConnecting: [.watchWrite, .park]
        case .established, .curlsOwn: [.watchRead]
        case .parked: [.watchRead, .park]
        case .parkedQuiet: [.watchRead, .park, .quietWait]
        case .spoiled: [.watchRead, .park, .activity]
        case .spoiledUnproven: [.watchWrite, .park, .activity]
        }
    }
}

/// What `UpstreamClient` and the loop do to a socket.
enum CurlSocketEvent: String, CaseIterable, Sendable {
    /// curl watches it for reading (`socketChanged`).
    case watchRead
    /// curl watches it for writing only.
    case watchWrite
    /// curl stops watching it (CURL_POLL_REMOVE): a watched socket parks.
    case park
    /// A loop wait begun after the parking was dispatched (`ParkedSockets.promote`).
    case quietWait
    /// The loop reports it ready: only a parked socket is the loop's to handle (a watched one
    /// goes to curl).
    case activity
    /// Dropped, or closed (`closeSocket`).
    case drop

    func apply(to socket: CurlSocket) {
        switch self {
        case .watchRead:
            socket.state = .watched(.read)
            socket.watchedForReading()
        case .watchWrite:
            socket.state = .watched(.write)
        case .park:
            if case .watched(let interest) = socket.state { socket.park(interest) }
        case .quietWait:
            socket.becameQuiet()
        case .activity:
            if case .parked = socket.state { socket.ready(Interest.read.rawValue) }
        case .drop:
            socket.state = .unregistered
        }
    }
}

/// `state link mark`, short and stable.
private func describe(_ socket: CurlSocket) -> String {
    func interest(_ i: Interest) -> String { (i.contains(.read) ? "r" : "") + (i.contains(.write) ? "w" : "") }
    let state: String
    switch socket.state {
    case .unregistered: state = "unregistered"
    case .watched(let i): state = "watched(\(interest(i)))"
    case .parked(let i, .unknown): state = "parked(\(interest(i)))"
    case .parked(let i, .quiet): state = "parked(\(interest(i)),quiet)"
    }
    return "\(state) \(socket.link) \(socket.readiness)"
}

/// Expected `state link mark` after each event, per start state, in `CurlSocketEvent.allCases` order.
private let table: [CurlSocketStart: [String]] = [
    .opened: [
        "watched(r) established watched", "watched(w) unproven unknown", "unregistered unproven unknown",
        "unregistered unproven unknown", "unregistered unproven unknown", "unregistered unproven unknown",
    ],
    .connecting: [
        "watched(r) established watched", "watched(w) unproven unknown", "parked(w) unproven unknown",
        "watched(w) unproven unknown", "watched(w) unproven unknown", "unregistered unproven unknown",
    ],
    .parkedConnecting: [
        "watched(r) established watched", "watched(w) unproven unknown", "parked(w) unproven unknown",
        "parked(w,quiet) unproven unknown", "unregistered spoiledUnproven unknown", "unregistered unproven unknown",
    ],
    .established: [
        "watched(r) established watched", "watched(w) established unknown", "parked(r) established parked",
        "watched(r) established watched", "watched(r) established watched", "unregistered established unknown",
    ],
    .parked: [
        "watched(r) established watched", "watched(w) established unknown", "parked(r) established parked",
        "parked(r,quiet) established quiet", "unregistered spoiled spoiled", "unregistered established unknown",
    ],
    .parkedQuiet: [
        "watched(r) established watched", "watched(w) established unknown", "parked(r,quiet) established quiet",
        "parked(r,quiet) established quiet", "unregistered spoiled spoiled", "unregistered established unknown",
    ],
    .spoiled: [
        "watched(r) spoiled spoiled", "watched(w) spoiled spoiled", "unregistered spoiled spoiled",
        "unregistered spoiled spoiled", "unregistered spoiled spoiled", "unregistered spoiled spoiled",
    ],
    .spoiledUnproven: [
        "watched(r) spoiled spoiled", "watched(w) spoiledUnproven unknown", "unregistered spoiledUnproven unknown",
        "unregistered spoiledUnproven unknown", "unregistered spoiledUnproven unknown",
        "unregistered spoiledUnproven unknown",
    ],
    .curlsOwn: [
        "watched(r) unproven unknown", "watched(w) unproven unknown", "parked(r) unproven unknown",
        "watched(r) unproven unknown", "watched(r) unproven unknown", "unregistered unproven unknown",
    ],
]

@Suite("CurlSocket: registration and link as two enums")
struct CurlSocketTests {
    @Test(
        "every start state and event gives the tabled registration, link and readiness mark",
        arguments: CurlSocketStart.allCases)
    func stateEventTable(start: CurlSocketStart) throws {
        let expected = try #require(table[start])
        #expect(expected.count == CurlSocketEvent.allCases.count)
        let loop = try EventLoop(name: "curl-socket")
        let client = UpstreamClient(loop: loop, tuning: RecordingTuning.self)
        let tuning = try #require(client.tuning as? RecordingTuning)
        for (event, want) in zip(CurlSocketEvent.allCases, expected) {
            // A real descriptor, registered as `UpstreamClient` registers it, so the loop can
            // deregister it when it turns ready while parked.
            var fds: [CInt] = [-1, -1]
            try #require(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0)
            defer {
                close(fds[0])
                close(fds[1])
            }
            let socket = CurlSocket(fd: fds[0], client: client, opened: start.opened)
            try loop.register(fd: fds[0], interest: .read, target: socket)
            for step in start.path { step.apply(to: socket) }
            event.apply(to: socket)
            #expect(describe(socket) == want, "\(start.rawValue) + \(event.rawValue)")
            // What the tuning was last told is always the socket's answer.
            #expect(tuning.known[fds[0]] ?? .unknown == socket.readiness, "\(start.rawValue) + \(event.rawValue)")
            tuning.known[fds[0]] = nil
            loop.forget(fd: fds[0])
        }
    }
}

/// A tuning that only remembers what the client told it of each socket's readiness.
final class RecordingTuning: UpstreamTuning {
    var known: [CInt: SocketReadiness] = [:]
    init(loop: EventLoop, rerun: @escaping (CInt) -> Bool) {}
    func runLibcurl(strict: Bool, _ body: () -> Void) { body() }
    var stalled: Bool { false }
    func stalledSockets() -> [CInt] { [] }
    func holdsBytes(for fd: CInt) -> Bool { false }
    func know(_ readiness: SocketReadiness, of fd: CInt) { known[fd] = readiness }
    func opened(_ fd: CInt) {}
    func closing(_ fd: CInt) {}
    func bodyMoved() {}
}
