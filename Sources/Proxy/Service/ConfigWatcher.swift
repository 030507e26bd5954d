import Glibc

/// Notices when the config file changes, so a config mounted from a Kubernetes ConfigMap (which
/// cannot send SIGHUP) reloads like a SIGHUP. inotify watches the file's directory — a ConfigMap
/// update swaps a `..data` symlink there rather than writing the file — and, when the path is a
/// symlink, the directory it resolves into. Only events that name the file, its target or the
/// ConfigMap's `..data` prompt a comparison of the file's bytes with those last seen, so busy
/// neighbours cost nothing and editors' temporary files and touch(1) cause no reload.
final class ConfigWatcher {
    /// The inotify descriptor to poll for readability.
    let fd: CInt
    private let path: String
    private var lastBytes: [UInt8]?
    /// The entry names whose events matter: the file's, its resolved target's, and a ConfigMap's
    /// `..data` symlink. Others in the same directories (a log, a database) are ignored without
    /// reading the file.
    private var names: Set<String>
    /// The directories watched: the file's, and each one its symlink has resolved into so far.
    private var directories: [String] = []
    /// Where the path resolved when last looked.
    private var resolved: String?

    /// Events that can mean new contents at `path`. Not `IN_MODIFY`: it fires on every `write(2)`
    /// to any file in the directory (a log appended beside the config would wake the watcher for
    /// each line), and a writer of the config closes it, which is `IN_CLOSE_WRITE`.
    static let mask = UInt32(IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_ATTRIB)

    /// Watches `path` (absolute); nil when inotify is unavailable (the proxy then reloads on SIGHUP only).
    init?(path: String) {
        let fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard fd >= 0 else { return nil }
        self.fd = fd
        self.path = path
        names = [Self.name(of: path), "..data"]
        guard watch(Self.directory(of: path)) else {
            close(fd)
            return nil
        }
        followTarget()
        lastBytes = Self.contents(path)
    }

    private func watch(_ directory: String) -> Bool {
        if directories.contains(directory) { return true }
        guard inotify_add_watch(fd, directory, Self.mask) >= 0 else { return false }
        directories.append(directory)
        return true
    }

    /// Watches where the path resolves now: a symlink re-pointed into another directory is
    /// followed there (else edits of the new target would go unseen).
    private func followTarget() {
        guard let real = realpath(path, nil) else { return }
        let target = String(cString: real)
        free(real)
        resolved = target
        names.insert(Self.name(of: target))
        _ = watch(Self.directory(of: target))
    }

    /// Whether the path resolves elsewhere than when last looked; it is then watched there too.
    /// Called about once a second: a link re-pointed in the middle of a chain (`config.json →
    /// current/ → releases/N/`) lives in a directory no watch covers.
    func targetMoved() -> Bool {
        let before = resolved
        followTarget()
        return resolved != before
    }

    deinit { close(fd) }

    /// Reads and discards the pending events; true when one of them may concern the file.
    func drainEvents() -> Bool {
        var buffer = [UInt8](repeating: 0, count: 4096)
        var relevant = false
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n > 0 {
                if !relevant { relevant = Self.concerns(buffer[0..<n], names: names) }
                continue
            }
            if n < 0 && errno == EINTR { continue }
            if relevant { followTarget() }
            return relevant
        }
    }

    /// Whether a batch of `struct inotify_event` records names one of `names`, has no name
    /// (the directory itself), or reports a queue overflow (events were lost).
    static func concerns(_ events: ArraySlice<UInt8>, names: Set<String>) -> Bool {
        let header = MemoryLayout<inotify_event>.size
        var offset = events.startIndex
        while offset + header <= events.endIndex {
            let mask = events.withUnsafeBytes {
                $0.loadUnaligned(fromByteOffset: offset - events.startIndex + 4, as: UInt32.self)
            }
            let length = Int(
                events.withUnsafeBytes {
                    $0.loadUnaligned(fromByteOffset: offset - events.startIndex + 12, as: UInt32.self)
                })
            if mask & UInt32(IN_Q_OVERFLOW) != 0 || length == 0 { return true }
            let nameBytes = events[(offset + header)..<min(offset + header + length, events.endIndex)]
            let name = String(decoding: nameBytes.prefix { $0 != 0 }, as: UTF8.self)
            if names.contains(name) { return true }
            offset += header + length
        }
        return false
    }

    /// Whether the file's bytes differ from those last seen (a missing file is no change: a
    /// ConfigMap swap removes it for an instant). Remembers the new bytes.
    func contentChanged() -> Bool {
        guard let bytes = Self.contents(path), bytes != lastBytes else { return false }
        lastBytes = bytes
        return true
    }

    /// Records the bytes a SIGHUP reload read, so the watcher does not reload them again.
    func noteReloaded() { lastBytes = Self.contents(path) }

    private static func name(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return path }
        return String(path[path.index(after: slash)...])
    }

    private static func directory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/"), slash != path.startIndex else { return "/" }
        return String(path[..<slash])
    }

    private static func contents(_ path: String) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while bytes.count <= 4 << 20 {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n < 0 { return nil }
            if n == 0 { break }
            bytes.append(contentsOf: chunk[0..<n])
        }
        return bytes
    }
}
