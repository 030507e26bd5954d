import Glibc

/// Notices when the config file changes, so a config mounted from a Kubernetes ConfigMap (which
/// cannot send SIGHUP) reloads like a SIGHUP. inotify watches the file's directory — a ConfigMap
/// update swaps a `..data` symlink there rather than writing the file — and, when the path is a
/// symlink, the directory it resolves into. Any event only prompts a comparison of the file's
/// bytes with those last seen, so editors' temporary files and touch(1) cause no reload.
final class ConfigWatcher {
    /// The inotify descriptor to poll for readability.
    let fd: CInt
    private let path: String
    private var lastBytes: [UInt8]?

    /// Events that can mean new contents at `path`.
    private static let mask = UInt32(IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_ATTRIB | IN_MODIFY)

    /// Watches `path` (absolute); nil when inotify is unavailable (the proxy then reloads on SIGHUP only).
    init?(path: String) {
        let fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard fd >= 0 else { return nil }
        self.fd = fd
        self.path = path
        var directories = [Self.directory(of: path)]
        if let real = realpath(path, nil) {
            let resolved = String(cString: real)
            free(real)
            if !directories.contains(Self.directory(of: resolved)) { directories.append(Self.directory(of: resolved)) }
        }
        var watching = false
        for directory in directories where inotify_add_watch(fd, directory, Self.mask) >= 0 { watching = true }
        guard watching else {
            close(fd)
            return nil
        }
        lastBytes = Self.contents(path)
    }

    deinit { close(fd) }

    /// Reads and discards the pending events; true when there were any.
    func drainEvents() -> Bool {
        var buffer = [UInt8](repeating: 0, count: 4096)
        var any = false
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n > 0 { any = true; continue }
            if n < 0 && errno == EINTR { continue }
            return any
        }
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
