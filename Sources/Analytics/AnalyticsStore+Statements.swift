import CSQLite

/// One prepared statement and the short name errors call it by.
struct SQLiteStatement {
    let handle: OpaquePointer
    let name: String

    /// Binds `bytes` (UTF-8) without copying: the caller keeps them alive until the statement
    /// has stepped, and clears the binding before they go.
    @inline(__always)
    func bindText(_ index: CInt, _ bytes: UnsafeBufferPointer<UInt8>) -> CInt {
        guard let base = bytes.baseAddress, !bytes.isEmpty else {
            // A NULL pointer would bind SQL NULL and trip NOT NULL; "" is copied, so no lifetime to keep.
            return sqlite3_bind_text(handle, index, "", 0, CSQLITE_TRANSIENT)
        }
        return base.withMemoryRebound(to: CChar.self, capacity: bytes.count) {
            sqlite3_bind_text64(handle, index, $0, sqlite3_uint64(bytes.count), CSQLITE_STATIC, UInt8(SQLITE_UTF8))
        }
    }

    /// Column `index` of the current row as a String (empty for NULL, which the schema forbids).
    @inline(__always)
    func text(_ index: CInt) -> String {
        guard let text = sqlite3_column_text(handle, index) else { return "" }
        let count = Int(sqlite3_column_bytes(handle, index))
        return String(decoding: UnsafeBufferPointer(start: text, count: count), as: UTF8.self)
    }

    /// Column `index` of the current row as an integer.
    @inline(__always)
    func int64(_ index: CInt) -> Int64 { sqlite3_column_int64(handle, index) }
}

/// Every statement the store runs, prepared once at open and reset after each use.
struct StoreStatements {
    let begin: SQLiteStatement
    let commit: SQLiteStatement
    let rollback: SQLiteStatement
    let insert: SQLiteStatement
    let oldestHead: SQLiteStatement
    let group: SQLiteStatement
    let deleteOne: SQLiteStatement
    let prune: SQLiteStatement
    let cap: SQLiteStatement
    let oldestSizes: SQLiteStatement
    let dropThrough: SQLiteStatement
    let storedBytes: SQLiteStatement
    let count: SQLiteStatement

    init(db: OpaquePointer) throws(AnalyticsStoreError) {
        var made: [OpaquePointer] = []
        func make(_ name: String, _ sql: String) throws(AnalyticsStoreError) -> SQLiteStatement {
            var handle: OpaquePointer?
            // PERSISTENT: these live as long as the connection, so SQLite keeps them out of its lookaside pool.
            let result = sqlite3_prepare_v3(db, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &handle, nil)
            guard result == SQLITE_OK, let handle else { throw .sqlite("sqlite3_prepare_v3(\(name))", result, db: db) }
            made.append(handle)
            return SQLiteStatement(handle: handle, name: name)
        }
        do {
            // IMMEDIATE takes the write lock up front, so a busy database fails at BEGIN, not halfway.
            begin = try make("begin", "BEGIN IMMEDIATE")
            commit = try make("commit", "COMMIT")
            rollback = try make("rollback", "ROLLBACK")
            insert = try make("insert", "INSERT INTO events(subject, key, value, timestamp) VALUES (?1, ?2, ?3, ?4)")
            // The lowest id is the event stored first; its (subject, timestamp) names the batch.
            oldestHead = try make("oldest", "SELECT subject, timestamp FROM events ORDER BY id LIMIT 1")
            // Served by events_batch (subject, timestamp, id): no sort, stops at the limit.
            group = try make(
                "batch",
                """
                SELECT id, subject, key, value, timestamp FROM events
                WHERE subject = ?1 AND timestamp = ?2 ORDER BY id LIMIT ?3
                """)
            deleteOne = try make("delete", "DELETE FROM events WHERE id = ?1")
            prune = try make("prune", "DELETE FROM events WHERE timestamp < ?1")
            // The id of the (cap+1)-th newest row and everything older; NULL (nothing) when under the cap.
            cap = try make(
                "cap",
                """
                DELETE FROM events WHERE id <= (SELECT id FROM events ORDER BY id DESC LIMIT 1 OFFSET ?1)
                """)
            count = try make("count", "SELECT count(*) FROM events")
            // Oldest first with their sizes: the byte cap reads only as far as the excess goes,
            // then deletes through that id, without summing the whole table.
            oldestSizes = try make("oldestSizes", "SELECT id, \(AnalyticsStore.storedBytesSQL) FROM events ORDER BY id")
            dropThrough = try make("dropThrough", "DELETE FROM events WHERE id <= ?1")
            storedBytes = try make(
                "storedBytes", "SELECT coalesce(sum(\(AnalyticsStore.storedBytesSQL)), 0) FROM events")
        } catch {
            for handle in made { sqlite3_finalize(handle) }
            throw error
        }
    }

    /// Finalizes every statement; the connection can close only after this.
    func finalize() {
        for statement in [
            begin, commit, rollback, insert, oldestHead, group, deleteOne, prune, cap, count, oldestSizes,
            dropThrough, storedBytes,
        ] {
            sqlite3_finalize(statement.handle)
        }
    }
}
