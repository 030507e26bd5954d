import CSQLite

extension AnalyticsStore {
    /// Bytes a value takes in the store's budget (`maxStoredBytes`): its subject, key and value.
    static let storedBytesSQL =
        "length(CAST(subject AS BLOB)) + length(CAST(key AS BLOB)) + length(CAST(value AS BLOB))"

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
    /// It runs after every eighth of the budget stored: under the budget it costs nothing (the
    /// total is kept by appends, summed only when a delete made it unknown), over it only the
    /// deleted rows are read (a windowed sum over the whole table here stalled ingest for
    /// hundreds of milliseconds each time).
    /// With `maxRows`, at most that many go in one call (one shorter transaction; the caller
    /// calls again while the result is `maxRows`).
    public func enforceByteCap(_ maxBytes: Int, maxRows: Int = .max) throws(AnalyticsStoreError) -> Int {
        let statements = try live("enforceByteCap")
        let total = try currentStoredBytes(statements)
        let excess = total - max(0, maxBytes)
        guard excess > 0, maxRows > 0 else { return 0 }
        // The oldest values whose sizes add up to the excess: everything through the last of them goes.
        let sizes = statements.oldestSizes
        var freed = 0, rows = 0, through: Int64?
        do {
            defer { sqlite3_reset(sizes.handle) }
            while freed < excess, rows < maxRows, try step(sizes) {
                through = sizes.int64(0)
                freed += Int(sizes.int64(1))
                rows += 1
            }
        }
        guard let through else { return 0 }
        sqlite3_bind_int64(statements.dropThrough.handle, 1, through)
        storedBytes = nil
        let dropped = try changes(statements.dropThrough)
        storedBytes = total - freed
        return dropped
    }

    /// The stored values' bytes: the kept total, or summed once when unknown.
    private func currentStoredBytes(_ statements: StoreStatements) throws(AnalyticsStoreError) -> Int {
        if let storedBytes { return storedBytes }
        let sum = statements.storedBytes
        defer { sqlite3_reset(sum.handle) }
        let total = try step(sum) ? Int(sum.int64(0)) : 0
        storedBytes = total
        return total
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
