import Glibc

/// The file-system side of opening the store: its directory, created and made durable.
enum StoreDirectory {
    /// The directory holding `path` ("." for a bare file name).
    static func parent(of path: String) -> String {
        guard let slash = path.utf8.lastIndex(of: UInt8(ascii: "/")) else { return "." }
        return slash == path.utf8.startIndex ? "/" : String(path[..<slash])
    }

    /// Creates `directory` and any missing parents, each mode 0700; existing ones are left as they are.
    static func make(_ directory: String) throws(AnalyticsStoreError) {
        if mkdir(directory, 0o700) == 0 { return }
        switch errno {
        case EEXIST:
            return
        case ENOENT:
            let parent = parent(of: directory)
            guard parent != directory else { throw .system("mkdir(\(directory))", errnoCode: ENOENT) }
            try make(parent)
            if mkdir(directory, 0o700) == 0 || errno == EEXIST { return }
        default:
            break
        }
        throw .system("mkdir(\(directory))", errnoCode: errno)
    }

    /// What `path` is when it exists and is no regular file ("a FIFO", "a directory"…); nil for a
    /// regular file (a symlink is followed) or nothing at all.
    static func nonRegularKind(_ path: String) -> String? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        switch info.st_mode & S_IFMT {
        case S_IFREG: return nil
        case S_IFIFO: return "a FIFO"
        case S_IFDIR: return "a directory"
        case S_IFSOCK: return "a socket"
        case S_IFCHR, S_IFBLK: return "a device"
        default: return "not a file"
        }
    }

    /// fsync of the directory makes the names in it (the database, its WAL) durable.
    static func sync(_ directory: String) throws(AnalyticsStoreError) {
        var fd: CInt
        repeat { fd = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC) } while fd == -1 && errno == EINTR
        guard fd >= 0 else { throw .system("open(\(directory))", errnoCode: errno) }
        defer { _ = Glibc.close(fd) }
        guard fsync(fd) == 0 || errno == EINVAL else { throw .system("fsync(\(directory))", errnoCode: errno) }
    }
}
