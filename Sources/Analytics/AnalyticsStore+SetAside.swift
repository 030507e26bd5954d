import CSQLite
import Glibc

/// A damaged store moved out of the way at start: where it went and what it held.
public struct StoreSetAside: Sendable, Equatable {
    /// The damaged database's new path, `<path>.corrupt-<unix time>` (its WAL, if any, beside it
    /// with `-wal` added, so `sqlite3` opens the pair as it was); the store's own path if even
    /// the rename failed.
    public let movedTo: String
    /// Why it could not be used.
    public let error: AnalyticsStoreError
    /// The unsent values still countable in the file (its main file only; nil when not even
    /// that can be read): they are never uploaded.
    public let unsentValues: Int?
    /// Why the rename failed (then nothing was moved); nil when it succeeded.
    public var renameErrno: CInt? = nil
}

extension AnalyticsStore {
    /// Renames the damaged database at `path` (and its WAL) aside, never overwriting an earlier
    /// one, and drops its shared-memory index (derived data, rebuilt by SQLite). Nothing is deleted
    /// that held a value.
    static func setAside(path: String, error: AnalyticsStoreError) -> StoreSetAside {
        let base = "\(path).corrupt-\(time(nil))"
        var target = base
        var attempt = 1
        while access(target, F_OK) == 0 || access(target + "-wal", F_OK) == 0 {
            target = "\(base)-\(attempt)"
            attempt += 1
        }
        guard rename(path, target) == 0 else {
            return StoreSetAside(movedTo: path, error: error, unsentValues: nil, renameErrno: errno)
        }
        if rename(path + "-wal", target + "-wal") != 0 && errno != ENOENT {
            // A WAL left under the store's name would be replayed into the new store: drop it from there.
            _ = unlink(path + "-wal")
        }
        _ = unlink(path + "-shm")
        try? StoreDirectory.sync(StoreDirectory.parent(of: path))
        // Only a regular file is opened to count: SQLite's open of a FIFO would block.
        let unsent = StoreDirectory.nonRegularKind(target) == nil ? countValues(at: target) : nil
        return StoreSetAside(movedTo: target, error: error, unsentValues: unsent)
    }

    /// `SELECT count(subject) FROM events` (nil for a table without the store's columns) on the file as it is, read-only and `immutable` (nothing is
    /// written beside it, its WAL is not read); nil when the file does not allow even that.
    private static func countValues(at path: String) -> Int? {
        var handle: OpaquePointer?
        defer { sqlite3_close_v2(handle) }
        let uri = "file:\(path.percentEncodedForURI)?immutable=1"
        guard sqlite3_open_v2(uri, &handle, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, nil) == SQLITE_OK, let handle else {
            return nil
        }
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(handle, "SELECT count(subject) FROM events", -1, &statement, nil) == SQLITE_OK else {
            return nil
        }
        defer { sqlite3_finalize(statement) }
        guard sqlite3_step(statement) == SQLITE_ROW else { return nil }
        return Int(sqlite3_column_int64(statement, 0))
    }
}

extension String {
    /// The path with `%`, `?` and `#` escaped, as an SQLite `file:` URI needs.
    fileprivate var percentEncodedForURI: String {
        var out = ""
        for c in self {
            switch c {
            case "%": out += "%25"
            case "?": out += "%3F"
            case "#": out += "%23"
            default: out.append(c)
            }
        }
        return out
    }
}

/// A `-wal` or `-shm` beside the store that was no regular file, moved out of the way at start.
public struct SidecarSetAside: Sendable, Equatable {
    /// The sidecar's path (`analytics.sqlite-wal`, `analytics.sqlite-shm`).
    public let path: String
    /// What it was ("a FIFO", "a directory"…).
    public let kind: String
    /// Where it went (`<path>.corrupt-<unix time>`); `path` itself if the rename failed.
    public let movedTo: String
}

extension AnalyticsStore {
    /// Moves a `-wal` or `-shm` that is no regular file out of the way before the store opens.
    /// SQLite writes only regular files there, so such a thing holds no value; left in place,
    /// a FIFO or a directory there makes every write fail (the store opens, but read-only) or
    /// the open itself fail. The store file is kept as it is.
    static func setAsideNonRegularSidecars(of path: String) -> [SidecarSetAside] {
        var moved: [SidecarSetAside] = []
        for sidecar in [path + "-wal", path + "-shm"] {
            guard let kind = StoreDirectory.nonRegularKind(sidecar) else { continue }
            let base = "\(sidecar).corrupt-\(time(nil))"
            var target = base
            var attempt = 1
            while access(target, F_OK) == 0 {
                target = "\(base)-\(attempt)"
                attempt += 1
            }
            moved.append(
                SidecarSetAside(path: sidecar, kind: kind, movedTo: rename(sidecar, target) == 0 ? target : sidecar))
        }
        if !moved.isEmpty { try? StoreDirectory.sync(StoreDirectory.parent(of: path)) }
        return moved
    }
}
