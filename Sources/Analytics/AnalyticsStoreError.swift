import CSQLite
import Glibc

/// A failed call of the analytics store: which SQLite (or file-system) call, and its message.
public struct AnalyticsStoreError: Error, Sendable, Equatable, CustomStringConvertible {
    private enum Code: Sendable, Equatable {
        /// SQLite's extended result code.
        case sqlite(CInt)
        /// An errno from a file-system call.
        case system(CInt)
        /// The store was closed, or the writer shut down, before the call.
        case closed
    }

    private let code: Code
    /// The call that failed, e.g. `sqlite3_step(insert)` or `mkdir(/state)`.
    public let call: String
    /// SQLite's or the system's text for the failure.
    public let message: String

    /// SQLite's extended result code, when SQLite reported the failure.
    public var sqliteCode: CInt? {
        if case .sqlite(let value) = code { return value }
        return nil
    }

    /// The errno, when a file-system call failed.
    public var errnoCode: CInt? {
        if case .system(let value) = code { return value }
        return nil
    }

    /// True when the store was closed (or the writer shut down) before the call.
    public var isClosed: Bool { code == .closed }

    /// The system's errno behind an SQLite I/O failure (`sqlite3_system_errno`), when there was one.
    public let systemErrno: CInt?

    /// True when the file system is out of space (or the file hit its size limit or a quota):
    /// SQLite's `SQLITE_FULL`, or an I/O error whose cause was ENOSPC, EDQUOT or EFBIG.
    public var isStorageFull: Bool {
        switch code {
        case .sqlite(let value) where value & 0xFF == SQLITE_FULL: true
        case .sqlite(let value) where value & 0xFF == SQLITE_IOERR: systemErrno.map(Self.fullErrnos.contains) ?? false
        case .system(let value): Self.fullErrnos.contains(value)
        default: false
        }
    }

    private static let fullErrnos: Set<CInt> = [ENOSPC, EDQUOT, EFBIG]

    /// True, for a failure while opening the store, when the file itself is no usable store:
    /// not a database, damaged pages, not a regular file, or an `events` table that is not the
    /// store's (`SQLITE_NOTADB`, `SQLITE_CORRUPT`, or `damaged`). Never true for a lock held by
    /// another process, permissions, a full disk or any other error: those leave the file as it is.
    public var isDamagedStore: Bool {
        guard case .sqlite(let value) = code else { return false }
        return value & 0xFF == SQLITE_CORRUPT || value & 0xFF == SQLITE_NOTADB
    }

    private init(code: Code, call: String, message: String, systemErrno: CInt? = nil) {
        self.code = code
        self.call = call
        self.message = message
        self.systemErrno = systemErrno
    }

    /// `call` failed with `result`; the message comes from the connection when there is one,
    /// since `sqlite3_errmsg` says more than `sqlite3_errstr` (e.g. which constraint).
    static func sqlite(_ call: String, _ result: CInt, db: OpaquePointer?) -> AnalyticsStoreError {
        let text = db.flatMap { sqlite3_errmsg($0) } ?? sqlite3_errstr(result)
        var message = text.map { String(cString: $0) } ?? "SQLite error \(result)"
        var systemErrno: CInt?
        // "disk I/O error" alone does not say which: the system's errno does (EIO, ENOSPC, EROFS).
        if result & 0xFF == SQLITE_IOERR, let db, case let cause = sqlite3_system_errno(db), cause != 0 {
            message += ": \(String(cString: strerror(cause))) (errno \(cause))"
            systemErrno = cause
        }
        return AnalyticsStoreError(code: .sqlite(result), call: call, message: message, systemErrno: systemErrno)
    }

    /// The file at `call`'s path is no usable store; `detail` says how (what `quick_check` found,
    /// or what kind of file it is).
    static func damaged(_ call: String, _ detail: String) -> AnalyticsStoreError {
        AnalyticsStoreError(code: .sqlite(SQLITE_CORRUPT), call: call, message: detail)
    }

    /// A file-system `call` failed with `errnoCode`.
    static func system(_ call: String, errnoCode: CInt) -> AnalyticsStoreError {
        AnalyticsStoreError(code: .system(errnoCode), call: call, message: String(cString: strerror(errnoCode)))
    }

    /// `call` came after `close()` or `shutdown()`.
    static func closed(_ call: String) -> AnalyticsStoreError {
        AnalyticsStoreError(code: .closed, call: call, message: "the analytics store is closed")
    }

    /// "sqlite3_step(insert) failed: database or disk is full (SQLite 13)".
    public var description: String {
        switch code {
        case .sqlite(let value): "\(call) failed: \(message) (SQLite \(value))"
        case .system(let value): "\(call) failed: \(message) (errno \(value))"
        case .closed: "\(call) failed: \(message)"
        }
    }
}
