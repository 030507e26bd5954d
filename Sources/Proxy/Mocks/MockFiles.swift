import Glibc
import Synchronization

/// Replay of a mock folder (docs/mocks.md): `<directory>/<rest>.json`, or the files of
/// the folder `<directory>/<rest>/` in name order, looping. Files are small development fixtures,
/// read on the loop thread.
public final class MockFiles: Sendable {
    /// What a lookup found.
    public enum Lookup: Equatable, Sendable {
        /// The body to serve and the file it came from.
        case found(body: [UInt8], file: String)
        /// Nothing at `file`, the path that was looked for.
        case missing(file: String)
        /// `file` exists but could not be read.
        case unreadable(file: String)
        /// The path tries to leave the folder.
        case invalidPath
    }

    private let cursors = Mutex<[String: Int]>([:])
    /// Largest mock file served, in bytes.
    public static let maxFileBytes = 16 << 20

    /// Creates a replay state (its folder cursors are shared by every loop).
    public init() {}

    /// Looks up the mock for `rest` (the path after the route prefix) under `directory`.
    public func lookup(directory: String, rest: Substring) -> Lookup {
        guard let relative = Self.safeRelativePath(rest) else { return .invalidPath }
        let base = relative.isEmpty ? directory + "/index" : directory + "/" + relative
        let file = base + ".json"
        switch Self.read(file) {
        case .success(let body): return .found(body: body, file: file)
        case .failure(let error) where error.code != ENOENT && error.code != ENOTDIR: return .unreadable(file: file)
        case .failure: break
        }
        guard let names = Self.list(base), !names.isEmpty else { return .missing(file: file) }
        let index = cursors.withLock { cursors in
            let next = cursors[base, default: 0]
            cursors[base] = next + 1
            return next % names.count
        }
        let chosen = base + "/" + names[index]
        switch Self.read(chosen) {
        case .success(let body): return .found(body: body, file: chosen)
        case .failure: return .unreadable(file: chosen)
        }
    }

    /// Whether a mock body is gzip bytes (its magic number, which no JSON starts with): a file
    /// gzipped by hand, or captured from a compressed response by other means. It is served with `Content-Encoding: gzip`, so a client reads it rather than garbage.
    static func isGzip(_ body: [UInt8]) -> Bool { body.count >= 2 && body[0] == 0x1F && body[1] == 0x8B }

    /// The rest of the path as a relative file path, or nil if any segment is `.`/`..`, or
    /// decodes to something holding a separator or NUL (`%2f`, `%5c`, `%00`).
    static func safeRelativePath(_ rest: Substring) -> String? {
        var segments: [String] = []
        for raw in rest.split(separator: "/", omittingEmptySubsequences: true) {
            guard let segment = percentDecoded(raw), segment != ".", segment != "..",
                !segment.contains("/"), !segment.contains("\\"), !segment.contains("\0")
            else { return nil }
            segments.append(segment)
        }
        return segments.joined(separator: "/")
    }

    private static func percentDecoded(_ s: Substring) -> String? {
        guard s.contains("%") else { return String(s) }
        var bytes: [UInt8] = []
        var iterator = s.utf8.makeIterator()
        while let b = iterator.next() {
            guard b == UInt8(ascii: "%") else { bytes.append(b); continue }
            guard let h = iterator.next().flatMap(hex), let l = iterator.next().flatMap(hex) else { return nil }
            bytes.append(h << 4 | l)
        }
        return String(validating: bytes, as: UTF8.self)
    }

    private static func hex(_ b: UInt8) -> UInt8? {
        switch b {
        case 0x30...0x39: b - 0x30
        case 0x41...0x46: b - 0x37
        case 0x61...0x66: b - 0x57
        default: nil
        }
    }

    /// `file` relative to `directory` (`a/b.json`), as error messages name it.
    static func relative(_ file: String, to directory: String) -> String {
        let prefix = directory.hasSuffix("/") ? directory : directory + "/"
        return file.hasPrefix(prefix) ? String(file.dropFirst(prefix.count)) : file
    }

    /// Reads a regular file, or fails with its errno (EISDIR for a folder, ENOENT for anything
    /// else that is no regular file). `O_NONBLOCK`: opening a FIFO would otherwise block the
    /// loop until some writer opened it.
    static func read(_ path: String) -> Result<[UInt8], Errno> {
        let fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { return .failure(Errno(errno)) }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { return .failure(Errno(errno)) }
        guard info.st_mode & S_IFMT == S_IFREG else { return .failure(Errno(ENOENT)) }
        guard Int(info.st_size) <= maxFileBytes else { return .failure(Errno(EFBIG)) }
        var bytes = [UInt8](repeating: 0, count: Int(info.st_size))
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + offset, $0.count - offset) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return .failure(Errno(n == 0 ? EIO : errno)) }
            offset += n
        }
        return .success(bytes)
    }

    /// The visible regular-file names of a folder in byte order, or nil if it is not a folder.
    /// Record mode's temporaries are left out: one a killed recording left holds part of a body.
    static func list(_ path: String) -> [String]? {
        guard let dir = opendir(path) else { return nil }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            let type = entry.pointee.d_type
            guard !name.hasPrefix("."), type == UInt8(DT_REG) || type == UInt8(DT_LNK) || type == UInt8(DT_UNKNOWN),
                !MockTemporaries.isTemporary(name)
            else { continue }
            names.append(name)
        }
        return names.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
    }
}

/// An errno value as an Error.
struct Errno: Error, Equatable {
    let code: Int32
    init(_ code: Int32) { self.code = code }
}
