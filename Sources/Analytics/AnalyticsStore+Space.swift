import CSQLite

extension AnalyticsStore {
    /// Bytes a value takes in the store's budget (`maxStoredBytes`): its subject, key and value.
    static let storedBytesSQL = "length(CAST(subject AS BLOB)) + length(CAST(key AS BLOB)) + length(CAST(value AS BLOB))"

    /// Turns on incremental vacuum so the file can shrink after pruning. The setting takes
    /// effect only before the first table exists; an older file without it is rebuilt once.
    func enableIncrementalVacuum(_ db: OpaquePointer) throws(AnalyticsStoreError) {
        guard try pragma(db, "auto_vacuum") != "2" else { return }
        try exec(db, "PRAGMA auto_vacuum=INCREMENTAL")
        if try pragma(db, "auto_vacuum") != "2" {
            // Tables already exist: VACUUM rewrites the file with the new setting (once).
            try exec(db, "VACUUM")
        }
    }

    /// Deletes the oldest values until the rest hold at most `maxBytes`; returns how many went.
    public func enforceByteCap(_ maxBytes: Int) throws(AnalyticsStoreError) -> Int {
        guard let db else { throw .closed("AnalyticsStore.enforceByteCap") }
        // A running total from the newest down: everything from the first row past the budget goes.
        try exec(db, """
            DELETE FROM events WHERE id <= (
                SELECT id FROM (SELECT id, sum(\(Self.storedBytesSQL)) OVER (ORDER BY id DESC) AS total FROM events)
                WHERE total > \(max(0, maxBytes)) ORDER BY id DESC LIMIT 1)
            """)
        return Int(sqlite3_changes64(db))
    }

    /// Gives freed pages back to the file system: an incremental vacuum, then a checkpoint that
    /// truncates the WAL and the database file. Cheap when little is free.
    public func reclaimSpace(minimumFreePages: Int = 256) throws(AnalyticsStoreError) {
        guard let db else { throw .closed("AnalyticsStore.reclaimSpace") }
        guard let free = Int(try pragma(db, "freelist_count")), free >= minimumFreePages else { return }
        try exec(db, "PRAGMA incremental_vacuum")
        try exec(db, "PRAGMA wal_checkpoint(TRUNCATE)")
    }
}
