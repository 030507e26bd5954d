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

    private init(code: Code, call: String, message: String) {
        self.code = code
        self.call = call
        self.message = message
    }

    /// `call` failed with `result`; the message comes from the connection when there is one,
    /// since `sqlite3_errmsg` says more than `sqlite3_errstr` (e.g. which constraint).
    static func sqlite(_ call: String, _ result: CInt, db: OpaquePointer?) -> AnalyticsStoreError {
        let text = db.flatMap { sqlite3_errmsg($0) } ?? sqlite3_errstr(result)
        var message = text.map { String(cString: $0) } ?? "SQLite error \(result)"
        // "disk I/O error" alone does not say which: the system's errno does (EIO, ENOSPC, EROFS).
        if result & 0xFF == SQLITE_IOERR, let db, case let cause = sqlite3_system_errno(db), cause != 0 {
            message += ": \(String(cString: strerror(cause))) (errno \(cause))"
        }
        return AnalyticsStoreError(code: .sqlite(result), call: call, message: message)
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
