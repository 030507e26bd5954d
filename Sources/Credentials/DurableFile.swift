import Glibc

/// One small file in the state directory, mode 0600, replaced atomically: the durable
/// write behind `tokens.json` and the other state files. Every call blocks on disk I/O
/// (fsync), so callers run them on a `BlockingWorker` or at startup, never on an event loop.
public final class DurableFile: Sendable {
    /// What `read` found.
    public enum ReadOutcome: Equatable, Sendable {
        /// No such file.
        case missing
        /// The file's bytes.
        case bytes([UInt8])
        /// It exists but cannot be read, is no regular file, or is larger than the size limit; `reason` says which.
        case unreadable(reason: String)
    }

    /// The directory, created (mode 0700) by `write` when missing.
    public let directory: String
    /// `<directory>/<name>`.
    public let path: String
    private var temporaryPath: String { path + ".tmp" }
    /// State files are tiny; anything this large is not one (and not worth reading).
    private let sizeLimit: Int

    /// The file `name` in `directory`; reads of more than `sizeLimit` bytes are refused.
    public init(directory: String, name: String, sizeLimit: Int = 1 << 20) {
        self.directory = directory
        path = directory.hasSuffix("/") ? directory + name : directory + "/" + name
        self.sizeLimit = sizeLimit
    }

    /// The file's bytes, or why there are none. Only a regular file is read: the open does not
    /// block (`O_NONBLOCK`: a FIFO under the file's name would otherwise hang the start until
    /// some writer opened it), and anything else there (FIFO, socket, device, directory) is
    /// `unreadable`, so callers set it aside like a damaged file.
    public func read() -> ReadOutcome {
        let fd: CInt
        do {
            fd = try DurableFile.retryingEINTR("open", path) { open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC) }
        } catch {
            return error.errnoCode == ENOENT ? .missing : .unreadable(reason: error.description)
        }
        defer { _ = close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { return .unreadable(reason: "fstat(\(path)) failed: errno \(errno)") }
        guard info.st_mode & S_IFMT == S_IFREG else {
            return .unreadable(reason: "\(path) is not a regular file but \(Self.kind(info.st_mode))")
        }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16384)
        while true {
            let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                return .unreadable(reason: "read(\(path)) failed: errno \(errno)")
            }
            if n == 0 { return .bytes(bytes) }
            bytes.append(contentsOf: chunk[0..<n])
            if bytes.count > sizeLimit { return .unreadable(reason: "\(path) is larger than \(sizeLimit) bytes") }
        }
    }

    /// "a FIFO", "a directory"…: what a non-regular file is, for messages.
    private static func kind(_ mode: mode_t) -> String {
        switch mode & S_IFMT {
        case S_IFIFO: "a FIFO"
        case S_IFDIR: "a directory"
        case S_IFSOCK: "a socket"
        case S_IFCHR, S_IFBLK: "a device"
        default: "no file"
        }
    }

    /// Writes `bytes` durably: a fresh 0600 temporary file, fsync, rename over the file,
    /// fsync of the directory. A crash leaves the old file or the new one.
    public func write(_ bytes: [UInt8]) throws(TokenStoreError) {
        try DurableFile.makeDirectory(directory)
        let tmp = temporaryPath
        // A stale temporary from a crash would make O_EXCL fail; it holds nothing we need.
        if unlink(tmp) == -1, errno != ENOENT { throw TokenStoreError(call: "unlink", path: tmp, errnoCode: errno) }
        // O_EXCL refuses to follow a planted symlink; 0600 from the start, so no window where others can read.
        let fd = try DurableFile.retryingEINTR("open", tmp) {
            open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        }
        do {
            defer { _ = close(fd) }
            // The umask can only remove bits, but be explicit about the mode anyway.
            try DurableFile.retryingEINTR("fchmod", tmp) { fchmod(fd, 0o600) }
            try writeAll(fd, bytes, path: tmp)
            try DurableFile.retryingEINTR("fsync", tmp) { fsync(fd) }
        } catch {
            _ = unlink(tmp)
            throw error
        }
        do {
            try DurableFile.retryingEINTR("rename", tmp) { rename(tmp, path) }
        } catch {
            _ = unlink(tmp)
            throw error
        }
        try syncDirectory()
    }

    /// Removes the file; a missing one is fine.
    public func delete() throws(TokenStoreError) {
        for file in [path, temporaryPath] where unlink(file) == -1 && errno != ENOENT {
            throw TokenStoreError(call: "unlink", path: file, errnoCode: errno)
        }
        do {
            try syncDirectory()
        } catch  where error.errnoCode == ENOENT {
            // No directory, no file: nothing to make durable.
        }
    }

    /// Renames the file to `<name>.corrupt-<unix time>` (with `-N` added if that exists, so an
    /// earlier one is never overwritten); returns where it ended up, or its own path if even
    /// the rename failed. It is never deleted.
    public func moveAside() -> String {
        let base = "\(path).corrupt-\(time(nil))"
        var target = base
        var attempt = 1
        while access(target, F_OK) == 0 {
            target = "\(base)-\(attempt)"
            attempt += 1
        }
        guard rename(path, target) == 0 else { return path }
        try? syncDirectory()
        return target
    }

    /// fsync of the directory makes the rename itself durable (ext4 and XFS need it).
    private func syncDirectory() throws(TokenStoreError) {
        let fd = try DurableFile.retryingEINTR("open", directory) {
            open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        }
        defer { _ = close(fd) }
        try DurableFile.retryingEINTR("fsync", directory) { fsync(fd) }
    }

    private func writeAll(_ fd: CInt, _ bytes: [UInt8], path: String) throws(TokenStoreError) {
        var written = 0
        while written < bytes.count {
            let n = try DurableFile.retryingEINTR("write", path) {
                bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + written, $0.count - written) }
            }
            written += n
        }
    }

    /// Creates `directory` and any missing parents, each mode 0700; existing ones are left as they are.
    static func makeDirectory(_ directory: String) throws(TokenStoreError) {
        if mkdir(directory, 0o700) == 0 { return }
        switch errno {
        case EEXIST:
            return
        case ENOENT:
            var parent = String(directory.reversed().drop { $0 == "/" }.drop { $0 != "/" }.reversed())
            while parent.count > 1, parent.hasSuffix("/") { parent.removeLast() }
            guard !parent.isEmpty, parent != directory else {
                throw TokenStoreError(call: "mkdir", path: directory, errnoCode: ENOENT)
            }
            try makeDirectory(parent)
            if mkdir(directory, 0o700) == 0 || errno == EEXIST { return }
            throw TokenStoreError(call: "mkdir", path: directory, errnoCode: errno)
        case let code:
            throw TokenStoreError(call: "mkdir", path: directory, errnoCode: code)
        }
    }

    /// Runs `body` until it stops failing with EINTR; any other failure throws a `TokenStoreError`.
    @discardableResult
    private static func retryingEINTR<T: FixedWidthInteger>(_ call: String, _ path: String, _ body: () -> T)
        throws(TokenStoreError) -> T
    {
        while true {
            let result = body()
            if result != -1 { return result }
            let code = errno
            if code != EINTR { throw TokenStoreError(call: call, path: path, errnoCode: code) }
        }
    }
}
