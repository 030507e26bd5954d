import CSQLite
import Glibc

/// The durable queue of analytics values: one SQLite database in WAL mode whose every commit
/// is fsynced before the call returns. Not thread-safe: it lives on the `AnalyticsWriter` thread
/// (created elsewhere, then handed over whole).
public final class AnalyticsStore {
    /// The database file.
    public let path: String
    /// The connection; nil once closed.
    var db: OpaquePointer?
    /// The prepared statements; nil once closed.
    var statements: StoreStatements?
    /// Bytes the stored values take in the `maxStoredBytes` budget, kept up to date by appends;
    /// nil when unknown (at open, after deletes and failures), then summed once when needed.
    var storedBytes: Int?

    /// Milliseconds to wait for another connection's lock (a second process on the same file).
    static let busyTimeoutMilliseconds: CInt = 5_000

    /// Why the database could not be opened. SQLite says only "unable to open database file"
    /// (and its errno is that of its last, read-only, attempt), so what the proxy's user may do
    /// with the directory and the file is checked here.
    private static func openFailure(path: String, directory: String, result: CInt, db: OpaquePointer?)
        -> AnalyticsStoreError
    {
        if access(directory, W_OK | X_OK) != 0 {
            return .system("creating files in \(directory) as uid \(getuid())", errnoCode: errno)
        }
        if access(path, F_OK) == 0, access(path, R_OK | W_OK) != 0 {
            return .system("opening \(path) for reading and writing as uid \(getuid())", errnoCode: errno)
        }
        return .sqlite("sqlite3_open_v2(\(path))", result, db: db)
    }

    /// Opens (or creates) the database at `path`, creating missing parent directories (mode 0700).
    public init(path: String) throws(AnalyticsStoreError) {
        self.path = path
        let directory = StoreDirectory.parent(of: path)
        try StoreDirectory.make(directory)
        // SQLite would open a FIFO (and then block reading it) or a device; only a file is a store.
        if let kind = StoreDirectory.nonRegularKind(path) {
            throw .damaged("stat(\(path))", "not a regular file but \(kind)")
        }
        var handle: OpaquePointer?
        // NOMUTEX: one thread at a time uses the connection, so SQLite's own locking is wasted work.
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE
        let result = sqlite3_open_v2(path, &handle, flags, nil)
        guard result == SQLITE_OK, let handle else {
            let error = Self.openFailure(path: path, directory: directory, result: result, db: handle)
            sqlite3_close_v2(handle)
            throw error
        }
        db = handle
        // Before the first read: another process's lock is waited for, never taken for damage.
        sqlite3_busy_timeout(handle, Self.busyTimeoutMilliseconds)
        do {
            try checkIntegrity(handle)
            try configure(handle)
            statements = try StoreStatements(db: handle)
            // A new database file's directory entry must be durable too, or a crash can lose the
            // whole file along with every commit fsynced into it.
            try StoreDirectory.sync(directory)
        } catch {
            close()
            // SQLite opens a file it cannot write read-only and says only "unable to open
            // database file" once it needs its WAL: a directory the proxy cannot write is named.
            if !error.isDamagedStore, access(directory, W_OK | X_OK) != 0 {
                throw .system("creating files in \(directory) as uid \(getuid())", errnoCode: errno)
            }
            throw error
        }
    }

    deinit { close() }

    /// Finalizes the statements and closes the connection (checkpointing the WAL). Idempotent.
    public func close() {
        statements?.finalize()
        statements = nil
        if let db { sqlite3_close_v2(db) }
        db = nil
    }

    /// Refuses a file that is no usable store, before `configure` changes anything in it.
    /// `PRAGMA quick_check(1)` reads every page once (about a tenth of a second for a store at
    /// the default byte budget), so damaged pages are found here, where the file can still be
    /// set aside, not by an upload hours later. An `events` table without the store's columns
    /// is another program's (or a damaged schema).
    private func checkIntegrity(_ db: OpaquePointer) throws(AnalyticsStoreError) {
        let verdict = try pragma(db, "quick_check(1)")
        guard verdict == "ok" else { throw .damaged("PRAGMA quick_check(\(path))", verdict) }
        // No `events` table yet (a new file): nothing to compare.
        guard try prepares(db, "SELECT 1 FROM events LIMIT 0") else { return }
        let sql = "SELECT id, subject, key, value, timestamp FROM events LIMIT 0"
        guard try prepares(db, sql) else {
            throw .damaged(
                "sqlite3_prepare_v2(\(sql))",
                "the events table is not the store's: \(String(cString: sqlite3_errmsg(db)))")
        }
    }

    /// Whether `sql` compiles against the file's schema (reading the schema fails on a damaged file: thrown).
    private func prepares(_ db: OpaquePointer, _ sql: String) throws(AnalyticsStoreError) -> Bool {
        var handle: OpaquePointer?
        defer { sqlite3_finalize(handle) }
        let prepared = sqlite3_prepare_v2(db, sql, -1, &handle, nil)
        if prepared == SQLITE_OK { return true }
        if prepared & 0xFF == SQLITE_ERROR { return false }
        throw .sqlite("sqlite3_prepare_v2(\(sql))", prepared, db: db)
    }

    private func configure(_ db: OpaquePointer) throws(AnalyticsStoreError) {
        try enableIncrementalVacuum(db)
        let mode = try pragma(db, "journal_mode=WAL")
        guard mode == "wal" else {
            // A file system without shared-memory support keeps the old mode; group commit needs WAL.
            throw .sqlite("PRAGMA journal_mode=WAL (got \(mode))", SQLITE_CANTOPEN, db: nil)
        }
        // FULL in WAL mode fsyncs the WAL at every commit: a 202 means the values are on disk.
        try exec(db, "PRAGMA synchronous=FULL")
        try exec(
            db,
            """
            CREATE TABLE IF NOT EXISTS events(
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                subject TEXT NOT NULL,
                key TEXT NOT NULL,
                value TEXT NOT NULL,
                timestamp INTEGER NOT NULL);
            CREATE INDEX IF NOT EXISTS events_batch ON events(subject, timestamp, id);
            """)
    }

    /// Runs `sql` (one or more statements, no rows wanted).
    func exec(_ db: OpaquePointer, _ sql: String) throws(AnalyticsStoreError) {
        let result = sqlite3_exec(db, sql, nil, nil, nil)
        guard result == SQLITE_OK else { throw .sqlite("sqlite3_exec(\(sql.prefix(40)))", result, db: db) }
    }

    /// Runs `PRAGMA <assignment>` and returns the first column of its row.
    func pragma(_ db: OpaquePointer, _ assignment: String) throws(AnalyticsStoreError) -> String {
        var handle: OpaquePointer?
        let sql = "PRAGMA \(assignment)"
        let prepared = sqlite3_prepare_v2(db, sql, -1, &handle, nil)
        guard prepared == SQLITE_OK, let handle else { throw .sqlite("sqlite3_prepare_v2(\(sql))", prepared, db: db) }
        defer { sqlite3_finalize(handle) }
        let stepped = sqlite3_step(handle)
        guard stepped == SQLITE_ROW else { throw .sqlite("sqlite3_step(\(sql))", stepped, db: db) }
        return SQLiteStatement(handle: handle, name: sql).text(0)
    }
}
