import Glibc

/// The temporary files record mode writes before renaming (`<file>.tmp-<base36>`): a recording
/// killed mid-write leaves one holding part of a body. Replay never serves them, and the start
/// removes those that are the recorder's (its user's, mode 0600).
enum MockTemporaries {
    /// Folders below a mock folder searched at start; deeper ones are left alone.
    static let maxDepth = 32

    /// True for `<name>.tmp-<lowercase base36>`, the name `MockRecorder` gives its temporaries.
    static func isTemporary(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        let marker = Array(".tmp-".utf8)
        guard bytes.count > marker.count + 1 else { return false }
        var start = bytes.count - 1
        while start > 0, isBase36(bytes[start]) { start -= 1 }
        // `start` is now on the byte before the base36 run: the marker must end there.
        let suffixStart = start + 1
        guard suffixStart < bytes.count, suffixStart >= marker.count + 1 else { return false }
        return Array(bytes[(suffixStart - marker.count)..<suffixStart]) == marker
    }

    /// Whether a file is as `MockRecorder` creates its temporaries: the proxy's user owns it and
    /// only that user may read it (mode 0600 at most). A mock folder is the user's own (often a
    /// checkout): a file of theirs whose name merely looks like a temporary is never deleted.
    static func isRecorders(_ info: stat) -> Bool {
        info.st_uid == geteuid() && info.st_mode & 0o077 == 0
    }

    private static func isBase36(_ b: UInt8) -> Bool { (b >= 0x30 && b <= 0x39) || (b >= 0x61 && b <= 0x7A) }

    /// Removes every temporary under `directory` (its subfolders too, never through a symlink);
    /// returns the paths removed. At start nothing records yet, so each one is a crash's leftover.
    static func removeStale(under directory: String, depth: Int = 0) -> [String] {
        guard depth <= maxDepth, let dir = opendir(directory) else { return [] }
        var entries: [(name: String, type: UInt8)] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != "." && name != ".." { entries.append((name, entry.pointee.d_type)) }
        }
        closedir(dir)
        var removed: [String] = []
        for (name, type) in entries {
            let path = directory + "/" + name
            var info = stat()
            guard type == UInt8(DT_DIR) || type == UInt8(DT_REG) || type == UInt8(DT_UNKNOWN), lstat(path, &info) == 0
            else { continue }
            switch info.st_mode & S_IFMT {
            case S_IFDIR: removed += removeStale(under: path, depth: depth + 1)
            case S_IFREG where isTemporary(name) && isRecorders(info) && unlink(path) == 0: removed.append(path)
            default: break
            }
        }
        return removed
    }
}
