import CSQLite
import Glibc
import Testing

@testable import Analytics

/// Writes `bytes` to `path`, replacing what is there.
private func writeFile(_ path: String, _ bytes: [UInt8]) {
    let file = fopen(path, "wb")!
    _ = bytes.withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, file) }
    fclose(file)
}

@Suite("Analytics store damage")
struct AnalyticsStoreDamageTests {
    @Test(
        "which failures mean the file is no store, and which a full disk",
        arguments: [
            (AnalyticsStoreError.sqlite("c", SQLITE_NOTADB, db: nil), true, false),
            (.sqlite("c", SQLITE_CORRUPT, db: nil), true, false),
            (.sqlite("c", SQLITE_ERROR, db: nil), false, false),
            (.damaged("quick_check", "page 3"), true, false),
            (.sqlite("c", SQLITE_BUSY, db: nil), false, false),
            (.sqlite("c", SQLITE_CANTOPEN, db: nil), false, false),
            (.sqlite("c", SQLITE_READONLY, db: nil), false, false),
            (.sqlite("c", SQLITE_FULL, db: nil), false, true),
            (.system("mkdir", errnoCode: EACCES), false, false),
            (.system("write", errnoCode: ENOSPC), false, true),
            (.system("write", errnoCode: EDQUOT), false, true),
        ])
    func classification(error: AnalyticsStoreError, damaged: Bool, full: Bool) {
        #expect(error.isDamagedStore == damaged)
        #expect(error.isStorageFull == full)
    }

    @Test("a file that is not a database is refused as damaged; set aside, a new store opens there")
    func garbageIsSetAside() throws {
        let dir = AnalyticsTestDirectory()
        let garbage = (0..<8192).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) }
        writeFile(dir.database, garbage)
        do {
            _ = try AnalyticsStore(path: dir.database)
            Issue.record("opened garbage as a store")
        } catch {
            #expect(error.isDamagedStore, "\(error)")
            let aside = AnalyticsStore.setAside(path: dir.database, error: error)
            #expect(aside.movedTo.hasPrefix(dir.database + ".corrupt-"))
            #expect(aside.unsentValues == nil)
            #expect(access(dir.database, F_OK) != 0)
        }
        let store = try AnalyticsStore(path: dir.database)
        try store.append(batches: [[sampleEvent("s", 1, "v")]])
        #expect(try store.count() == 1)
    }

    @Test("an events table without the store's columns is another schema: refused before anything is written")
    func foreignSchemaIsRefused() throws {
        let dir = AnalyticsTestDirectory()
        var db: OpaquePointer?
        #expect(sqlite3_open(dir.database, &db) == SQLITE_OK)
        #expect(
            sqlite3_exec(
                db,
                "CREATE TABLE events(id INTEGER PRIMARY KEY, payload BLOB); INSERT INTO events(payload) VALUES (x'00')",
                nil, nil, nil) == SQLITE_OK)
        sqlite3_close(db)
        var before = stat()
        stat(dir.database, &before)
        do {
            _ = try AnalyticsStore(path: dir.database)
            Issue.record("opened another program's events table")
        } catch {
            #expect(error.isDamagedStore, "\(error)")
            var after = stat()
            stat(dir.database, &after)
            #expect(
                after.st_size == before.st_size && after.st_mtim.tv_nsec == before.st_mtim.tv_nsec,
                "the file was changed")
            #expect(
                AnalyticsStore.setAside(path: dir.database, error: error).unsentValues == nil,
                "its rows are no store values")
        }
    }

    @Test("set aside counts the unsent values a readable store held, and moves its WAL beside it")
    func setAsideCountsAndKeepsTheWAL() throws {
        let dir = AnalyticsTestDirectory()
        do {
            let store = try AnalyticsStore(path: dir.database)
            try store.append(batches: [[sampleEvent("s", 1, "a"), sampleEvent("s", 2, "b"), sampleEvent("s", 3, "c")]])
            store.close()
        }
        writeFile(dir.database + "-wal", Array("not a wal".utf8))
        let aside = AnalyticsStore.setAside(path: dir.database, error: .damaged("test", "by hand"))
        #expect(aside.unsentValues == 3)
        #expect(access(aside.movedTo + "-wal", F_OK) == 0)
        #expect(access(dir.database + "-wal", F_OK) != 0)
        let second = AnalyticsStore.setAside(path: dir.database, error: .damaged("test", "nothing there"))
        #expect(second.movedTo == dir.database, "nothing to move: the path is returned as it is")
    }
}
