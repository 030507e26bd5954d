import Glibc
import Testing

@testable import Proxy

@Suite("ConfigWatcher events")
struct ConfigWatcherTests {
    /// One `struct inotify_event` record for `name` (padded to a multiple of 4 like the kernel's).
    private func record(_ name: String?, mask: Int32 = Int32(IN_MODIFY)) -> [UInt8] {
        var event = inotify_event()
        event.wd = 1
        event.mask = UInt32(mask)
        var nameBytes: [UInt8] = name.map { Array($0.utf8) + [0] } ?? []
        while nameBytes.count % 4 != 0 { nameBytes.append(0) }
        event.len = UInt32(nameBytes.count)
        let header: [UInt8] = withUnsafeBytes(of: &event) { [UInt8]($0) }
        return header + nameBytes
    }

    private let names: Set<String> = ["config.json", "..data"]

    @Test("events of other files in the directory are ignored, so a busy neighbour never re-reads the config")
    func neighboursIgnored() {
        let batch = record("proxy.log") + record("analytics.db-wal") + record(".config.json.swp")
        #expect(!ConfigWatcher.concerns(batch[...], names: names))
    }

    @Test("an event naming the file, or the ConfigMap's data symlink, concerns it wherever it is in the batch")
    func ownEventsCount() {
        #expect(ConfigWatcher.concerns((record("proxy.log") + record("config.json"))[...], names: names))
        #expect(ConfigWatcher.concerns(record("..data", mask: Int32(IN_MOVED_TO))[...], names: names))
    }

    @Test("a queue overflow or a nameless event counts: events may have been lost")
    func overflowCounts() {
        #expect(ConfigWatcher.concerns(record(nil, mask: Int32(IN_Q_OVERFLOW))[...], names: names))
        #expect(ConfigWatcher.concerns(record(nil)[...], names: names))
    }

    @Test("a truncated batch is read no further than it goes")
    func truncated() {
        let batch = record("config.json")
        #expect(!ConfigWatcher.concerns(batch[0..<10], names: names))
    }

    @Test("a log written beside the config, line by line, wakes the watcher for none of its writes")
    func neighbourWritesQueueNothing() throws {
        var template = Array("/tmp/config-watcher-XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        let directory = String(cString: try #require(made))
        defer { _ = system("rm -rf '\(directory)'") }
        let config = directory + "/config.json"
        try write(config, "{}")
        let watcher = try #require(ConfigWatcher(path: config))

        // A log kept open and appended to: IN_MODIFY per write, which the watcher does not ask for.
        let log = open(directory + "/proxy.log", O_WRONLY | O_CREAT | O_CLOEXEC, 0o644)
        try #require(log >= 0)
        _ = watcher.drainEvents()  // the log's IN_CREATE
        for _ in 0..<50 { _ = "line\n".withCString { Glibc.write(log, $0, 5) } }
        #expect(queuedEventBytes(watcher.fd) == 0)
        close(log)
        #expect(!watcher.drainEvents())  // its IN_CLOSE_WRITE names the log, not the config

        // Rewriting the config is noticed, and its bytes are new.
        try write(config, "{\"workers\": 1}")
        #expect(queuedEventBytes(watcher.fd) > 0)
        #expect(watcher.drainEvents())
        #expect(watcher.contentChanged())
    }

    /// The bytes of events the kernel holds for the watcher (FIONREAD). Not `poll`: the test
    /// process links the executable's `poll` (Upstream's `pollAnsweringKnownSockets`), which
    /// answers a zero-timeout check of one descriptor from per-descriptor state (marks, bytes read
    /// ahead) that other tests, running at the same time, set on socket numbers. One fresh-clone
    /// run saw that check answer "readable" after the log's writes: a fixture had closed a
    /// spoiled socket without clearing its mark, and the watcher's descriptor took the number
    /// (ClientReadAheadTests, since fixed). The kernel's own count is what this test asks about.
    private func queuedEventBytes(_ fd: CInt) -> CInt {
        var count: CInt = 0
        return ioctl(fd, UInt(FIONREAD), &count) == 0 ? count : -1
    }

    private func write(_ path: String, _ text: String) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        try #require(fd >= 0)
        defer { close(fd) }
        _ = text.withCString { Glibc.write(fd, $0, strlen($0)) }
    }
}
