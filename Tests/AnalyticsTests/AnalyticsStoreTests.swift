import Glibc
import Testing

@testable import Analytics

/// A fresh directory under /tmp, removed (with everything in it) when the test ends.
final class AnalyticsTestDirectory {
    let path: String

    init() {
        var template = Array("/tmp/analytics-store-test-XXXXXX".utf8CString)
        path = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
    }

    /// `<directory>/events.sqlite`.
    var database: String { path + "/events.sqlite" }

    deinit { remove(path) }

    private func remove(_ target: String) {
        var info = stat()
        guard lstat(target, &info) == 0 else { return }
        guard info.st_mode & S_IFMT == S_IFDIR else {
            unlink(target)
            return
        }
        if let dir = opendir(target) {
            var names: [String] = []
            while let entry = readdir(dir) {
                let name = withUnsafeBytes(of: entry.pointee.d_name) {
                    String(cString: $0.bindMemory(to: CChar.self).baseAddress!)
                }
                if name != ".", name != ".." { names.append(name) }
            }
            closedir(dir)
            for name in names { remove(target + "/" + name) }
        }
        rmdir(target)
    }
}

/// Copies a file byte for byte (the `-shm` index is not copied: SQLite rebuilds it from the WAL).
func copyFile(_ source: String, to target: String) {
    guard let input = fopen(source, "rb"), let output = fopen(target, "wb") else { return }
    defer {
        fclose(input)
        fclose(output)
    }
    var buffer = [UInt8](repeating: 0, count: 65536)
    while case let n = fread(&buffer, 1, buffer.count, input), n > 0 { fwrite(buffer, 1, n, output) }
}

/// An event for `subject` at `timestamp`, keyed `k.<value>` so each is recognisable.
func sampleEvent(_ subject: String, _ timestamp: Int64, _ value: String) -> NewEvent {
    NewEvent(subject: subject, key: "pennmobile.k.\(value)", value: value, timestamp: timestamp)
}

@Suite("Analytics store")
struct AnalyticsStoreTests {
    @Test("the oldest batch is the first event's (subject, timestamp) group, in id order")
    func batchGrouping() throws {
        let dir = AnalyticsTestDirectory()
        let store = try AnalyticsStore(path: dir.database)
        try store.append([sampleEvent("alice", 100, "a"), sampleEvent("bob", 100, "b")])
        try store.append([sampleEvent("alice", 100, "c"), sampleEvent("alice", 101, "d"), sampleEvent("bob", 99, "e")])

        let first = try store.oldestBatch(limit: 10)
        #expect(first.map(\.value) == ["a", "c"])
        #expect(first.map(\.id) == [1, 3])
        #expect(first.allSatisfy { $0.subject == "alice" && $0.timestamp == 100 })
        #expect(first[0] == StoredEvent(id: 1, subject: "alice", key: "pennmobile.k.a", value: "a", timestamp: 100))

        var order: [[String]] = [first.map(\.value)]
        try store.delete(ids: first.map(\.id))
        while case let batch = try store.oldestBatch(limit: 10), !batch.isEmpty {
            order.append(batch.map(\.value))
            try store.delete(ids: batch.map(\.id))
        }
        // Oldest by insertion, not by timestamp: bob@99 was stored last, so it goes last.
        #expect(order == [["a", "c"], ["b"], ["d"], ["e"]])
        #expect(try store.count() == 0)
    }

    @Test("a batch holds at most `limit` values, the oldest first; the rest follow")
    func batchLimit() throws {
        let dir = AnalyticsTestDirectory()
        let store = try AnalyticsStore(path: dir.database)
        try store.append((0..<7).map { sampleEvent("alice", 5, "\($0)") })
        #expect(try store.oldestBatch(limit: 0).isEmpty)
        let head = try store.oldestBatch(limit: 3)
        #expect(head.map(\.value) == ["0", "1", "2"])
        try store.delete(ids: head.map(\.id))
        #expect(try store.oldestBatch(limit: 3).map(\.value) == ["3", "4", "5"])
        #expect(try store.oldestBatch(limit: 100).map(\.value) == ["3", "4", "5", "6"])
    }

    @Test("delete removes exactly the given ids; unknown ids and an empty list are fine")
    func delete() throws {
        let dir = AnalyticsTestDirectory()
        let store = try AnalyticsStore(path: dir.database)
        try store.append((0..<5).map { sampleEvent("alice", 1, "\($0)") })
        try store.delete(ids: [2, 4, 999])
        try store.delete(ids: [])
        #expect(try store.count() == 3)
        #expect(try store.oldestBatch(limit: 10).map(\.id) == [1, 3, 5])
    }

    @Test("prune deletes values stamped before the cut-off and counts them")
    func prune() throws {
        let dir = AnalyticsTestDirectory()
        let store = try AnalyticsStore(path: dir.database)
        try store.append([
            sampleEvent("a", 30, "x"), sampleEvent("a", 10, "y"), sampleEvent("b", 20, "z"), sampleEvent("b", 19, "w"),
        ])
        #expect(try store.prune(olderThan: 20) == 2)
        #expect(try store.prune(olderThan: 20) == 0)
        #expect(try store.count() == 2)
        var left: [String] = []
        while case let batch = try store.oldestBatch(limit: 10), !batch.isEmpty {
            left += batch.map(\.value)
            try store.delete(ids: batch.map(\.id))
        }
        #expect(left == ["x", "z"])
    }

    @Test("the cap keeps the newest values and counts what it dropped")
    func cap() throws {
        let dir = AnalyticsTestDirectory()
        let store = try AnalyticsStore(path: dir.database)
        try store.append((0..<10).map { sampleEvent("alice", Int64(100 - $0), "\($0)") })
        #expect(try store.enforceCap(100) == 0)
        #expect(try store.enforceCap(10) == 0)
        #expect(try store.enforceCap(4) == 6)
        #expect(try store.count() == 4)
        var left: [String] = []
        while case let batch = try store.oldestBatch(limit: 10), !batch.isEmpty {
            left += batch.map(\.value)
            try store.delete(ids: batch.map(\.id))
        }
        #expect(left == ["6", "7", "8", "9"])
        try store.append([sampleEvent("a", 1, "p"), sampleEvent("a", 1, "q")])
        #expect(try store.enforceCap(0) == 2)
        #expect(try store.count() == 0)
    }

    @Test("count follows appends and deletes")
    func count() throws {
        let dir = AnalyticsTestDirectory()
        let store = try AnalyticsStore(path: dir.database)
        #expect(try store.count() == 0)
        try store.append([])
        #expect(try store.count() == 0)
        try store.append((0..<250).map { sampleEvent("s", Int64($0 % 3), "\($0)") })
        #expect(try store.count() == 250)
        try store.delete(ids: [1, 2])
        #expect(try store.count() == 248)
    }

    @Test("text round-trips byte for byte: empty, non-ASCII, embedded NUL, long")
    func textRoundTrip() throws {
        let dir = AnalyticsTestDirectory()
        let store = try AnalyticsStore(path: dir.database)
        let values = ["", "é 日本 🎉", "a\u{0}b", String(repeating: "x", count: 100_000), "1"]
        try store.append(values.map { NewEvent(subject: "π", key: "k.\($0.utf8.count)", value: $0, timestamp: -1) })
        let batch = try store.oldestBatch(limit: 10)
        #expect(batch.map(\.value) == values)
        #expect(batch.allSatisfy { $0.subject == "π" && $0.timestamp == -1 })
    }

    @Test("values survive close and reopen; ids are never reused")
    func reopen() throws {
        let dir = AnalyticsTestDirectory()
        do {
            let store = try AnalyticsStore(path: dir.database)
            try store.append([sampleEvent("alice", 7, "a"), sampleEvent("alice", 7, "b"), sampleEvent("bob", 8, "c")])
            try store.delete(ids: [3])
            store.close()
            store.close()
        }
        let store = try AnalyticsStore(path: dir.database)
        #expect(try store.count() == 2)
        #expect(try store.oldestBatch(limit: 10).map(\.value) == ["a", "b"])
        try store.append([sampleEvent("bob", 9, "d")])
        try store.delete(ids: [1, 2])
        // AUTOINCREMENT: id 3 was deleted before the restart and still is not handed out again.
        #expect(try store.oldestBatch(limit: 10).map(\.id) == [4])
    }

    @Test("a commit is in the files when append returns: a copy taken without closing (as after kill -9) has it")
    func crashCopy() throws {
        let dir = AnalyticsTestDirectory()
        let store = try AnalyticsStore(path: dir.database)
        try store.append((0..<100).map { sampleEvent("alice", Int64($0), "\($0)") })
        try store.delete(ids: [1])
        // Not closed: nothing is checkpointed into the main file, the values live only in the WAL.
        let crashed = AnalyticsTestDirectory()
        for suffix in ["", "-wal"] { copyFile(dir.database + suffix, to: crashed.database + suffix) }
        let reopened = try AnalyticsStore(path: crashed.database)
        #expect(try reopened.count() == 99)
        #expect(try reopened.oldestBatch(limit: 10).map(\.value) == ["1"])
        _ = store
    }

    @Test("opening creates missing parent directories (0700) and uses WAL")
    func directoriesAndWAL() throws {
        let dir = AnalyticsTestDirectory()
        let path = dir.path + "/state/analytics/events.sqlite"
        let store = try AnalyticsStore(path: path)
        var info = stat()
        #expect(stat(dir.path + "/state/analytics", &info) == 0)
        #expect(info.st_mode & 0o777 == 0o700)
        #expect(stat(dir.path + "/state", &info) == 0)
        #expect(info.st_mode & 0o777 == 0o700)
        try store.append([sampleEvent("a", 1, "x")])
        // In WAL mode the log sits beside the database while the connection is open.
        #expect(access(path + "-wal", F_OK) == 0)
    }

    @Test("a closed store throws `closed`, naming the call")
    func closedStore() throws {
        let dir = AnalyticsTestDirectory()
        let store = try AnalyticsStore(path: dir.database)
        store.close()
        #expect(throws: AnalyticsStoreError.self) { try store.count() }
        do {
            try store.append([sampleEvent("a", 1, "x")])
            Issue.record("append after close succeeded")
        } catch {
            #expect(error.isClosed)
            #expect(error.description.contains("AnalyticsStore.append"))
        }
    }

    @Test("an unusable path fails with the call and the system's message")
    func unusablePath() throws {
        let dir = AnalyticsTestDirectory()
        let file = dir.path + "/plain-file"
        fclose(fopen(file, "w"))
        do {
            _ = try AnalyticsStore(path: file + "/sub/events.sqlite")
            Issue.record("opened a database under a regular file")
        } catch {
            #expect(error.errnoCode == ENOTDIR)
            #expect(error.description.hasPrefix("mkdir(\(file)"))
        }
        do {
            _ = try AnalyticsStore(path: dir.path)
            Issue.record("opened a directory as a database")
        } catch {
            // Not a file at all: damaged as far as the store goes (the service sets it aside).
            #expect(error.isDamagedStore)
            #expect(error.description.contains("not a regular file but a directory"))
        }
    }
}
