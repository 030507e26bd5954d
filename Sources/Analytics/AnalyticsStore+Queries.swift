import CSQLite

extension AnalyticsStore {
    /// Stores `events` in one transaction, durable when this returns.
    public func append(_ events: [NewEvent]) throws(AnalyticsStoreError) {
        try append(batches: CollectionOfOne(events))
    }

    /// Stores every event of every batch in one transaction: the writer's group commit.
    func append(batches: some Sequence<[NewEvent]>) throws(AnalyticsStoreError) {
        let statements = try live("append")
        let insert = statements.insert
        var bytes = 0
        do {
            try transaction(statements) { () throws(AnalyticsStoreError) in
                // The bindings point into strings that are gone after the loop.
                defer { sqlite3_clear_bindings(insert.handle) }
                for batch in batches {
                    for event in batch {
                        try insertRow(insert, event)
                        bytes += event.subject.utf8.count + event.key.utf8.count + event.value.utf8.count
                    }
                }
            }
        } catch {
            storedBytes = nil
            throw error
        }
        storedBytes = storedBytes.map { $0 + bytes }
    }

    /// The batch to upload next: the events sharing the oldest event's subject and timestamp
    /// (one upload body carries one of each), in id order, at most `limit` of them and at most
    /// `maxBytes` of keys, values and their JSON framing (the first event always goes).
    public func oldestBatch(limit: Int, maxBytes: Int = .max) throws(AnalyticsStoreError) -> [StoredEvent] {
        let statements = try live("oldestBatch")
        guard limit > 0 else { return [] }
        let head = statements.oldestHead
        let group = statements.group
        defer {
            sqlite3_reset(head.handle)
            sqlite3_reset(group.handle)
            sqlite3_clear_bindings(group.handle)
        }
        guard try step(head) else { return [] }
        // bind_value copies the subject, so the head row may go before the batch is read.
        sqlite3_bind_value(group.handle, 1, sqlite3_column_value(head.handle, 0))
        sqlite3_bind_int64(group.handle, 2, head.int64(1))
        sqlite3_bind_int64(group.handle, 3, Int64(limit))
        sqlite3_reset(head.handle)
        var batch: [StoredEvent] = []
        batch.reserveCapacity(min(limit, 1024))
        var bytes = 0
        while try step(group) {
            let event = StoredEvent(
                id: group.int64(0), subject: group.text(1), key: group.text(2),
                value: group.text(3), timestamp: group.int64(4))
            bytes += event.key.utf8.count + event.value.utf8.count + Self.uploadFramingBytes
            if bytes > maxBytes && !batch.isEmpty { break }
            batch.append(event)
        }
        return batch
    }

    /// `{"key":"","value":""},`: what each value adds to an upload body besides its two strings.
    static let uploadFramingBytes = 22

    /// Deletes the events with these ids (an uploaded or rejected batch) in one transaction.
    public func delete(ids: [Int64]) throws(AnalyticsStoreError) {
        let statements = try live("delete")
        guard !ids.isEmpty else { return }
        let delete = statements.deleteOne
        storedBytes = nil
        try transaction(statements) { () throws(AnalyticsStoreError) in
            for id in ids {
                sqlite3_bind_int64(delete.handle, 1, id)
                defer { sqlite3_reset(delete.handle) }
                _ = try step(delete)
            }
        }
    }

    /// Deletes events stamped before `timestamp` (Unix seconds); returns how many.
    public func prune(olderThan timestamp: Int64) throws(AnalyticsStoreError) -> Int {
        let statements = try live("prune")
        sqlite3_bind_int64(statements.prune.handle, 1, timestamp)
        storedBytes = nil
        return try changes(statements.prune)
    }

    /// Deletes the oldest events beyond the newest `maxEvents`; returns how many.
    public func enforceCap(_ maxEvents: Int) throws(AnalyticsStoreError) -> Int {
        let statements = try live("enforceCap")
        sqlite3_bind_int64(statements.cap.handle, 1, Int64(max(0, maxEvents)))
        storedBytes = nil
        return try changes(statements.cap)
    }

    /// How many events are stored.
    public func count() throws(AnalyticsStoreError) -> Int {
        let statements = try live("count")
        let count = statements.count
        defer { sqlite3_reset(count.handle) }
        guard try step(count) else { return 0 }
        return Int(count.int64(0))
    }

    // MARK: helpers

    /// The statements, or `.closed` naming `call` once the store is closed.
    func live(_ call: String) throws(AnalyticsStoreError) -> StoreStatements {
        guard let statements else { throw .closed("AnalyticsStore.\(call)") }
        return statements
    }

    /// Steps once: true for a row, false when done; anything else throws (the caller resets).
    func step(_ statement: SQLiteStatement) throws(AnalyticsStoreError) -> Bool {
        switch sqlite3_step(statement.handle) {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        case let result: throw .sqlite("sqlite3_step(\(statement.name))", result, db: db)
        }
    }

    /// Runs a bound DELETE to completion and returns the rows it removed.
    func changes(_ statement: SQLiteStatement) throws(AnalyticsStoreError) -> Int {
        defer {
            sqlite3_reset(statement.handle)
            sqlite3_clear_bindings(statement.handle)
        }
        _ = try step(statement)
        return Int(sqlite3_changes64(db))
    }

    /// BEGIN IMMEDIATE, `body`, COMMIT; ROLLBACK if either throws (and a transaction is still open).
    private func transaction(
        _ statements: StoreStatements,
        _ body: () throws(AnalyticsStoreError) -> Void
    ) throws(AnalyticsStoreError) {
        try finish(statements.begin)
        do {
            try body()
            try finish(statements.commit)
        } catch {
            // Some failures (SQLITE_FULL, IOERR) already rolled back; a second ROLLBACK would only fail.
            if let db, sqlite3_get_autocommit(db) == 0 { try? finish(statements.rollback) }
            throw error
        }
    }

    /// Steps a statement that returns no rows, then resets it.
    private func finish(_ statement: SQLiteStatement) throws(AnalyticsStoreError) {
        defer { sqlite3_reset(statement.handle) }
        _ = try step(statement)
    }

    /// Binds one event (text without copying: the bytes outlive the step) and inserts it.
    @inline(__always)
    private func insertRow(_ insert: SQLiteStatement, _ event: NewEvent) throws(AnalyticsStoreError) {
        let handle = insert.handle
        var subject = event.subject
        var key = event.key
        var value = event.value
        let result = subject.withUTF8 { subject in
            key.withUTF8 { key in
                value.withUTF8 { value -> CInt in
                    var bound = insert.bindText(1, subject)
                    if bound == SQLITE_OK { bound = insert.bindText(2, key) }
                    if bound == SQLITE_OK { bound = insert.bindText(3, value) }
                    if bound == SQLITE_OK { bound = sqlite3_bind_int64(handle, 4, event.timestamp) }
                    return bound == SQLITE_OK ? sqlite3_step(handle) : bound
                }
            }
        }
        guard result == SQLITE_DONE else {
            let error = AnalyticsStoreError.sqlite("sqlite3_step(insert)", result, db: db)
            sqlite3_reset(handle)
            throw error
        }
        sqlite3_reset(handle)
    }
}
