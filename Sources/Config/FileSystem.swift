#if canImport(Glibc)
import Glibc
#endif

/// The few file-system calls config loading needs, on Glibc alone.
enum FileSystem {
    /// A readable sentence for an errno value.
    static func describe(errno code: Int32) -> String {
        String(cString: strerror(code))
    }

    /// The whole file, refusing more than `limit` bytes so a wrong path (say /dev/zero) cannot hang loading.
    static func readFile(_ path: String, limit: Int) -> Result<[UInt8], ConfigError> {
        var fd: Int32
        repeat { fd = open(path, O_RDONLY | O_CLOEXEC) } while fd < 0 && errno == EINTR
        guard fd >= 0 else {
            let code = errno
            var message = "cannot read \(path): \(describe(errno: code))"
            if code == EACCES {
                // The usual container mistake: a secret mounted readable by root only.
                message +=
                    " (the proxy runs as uid \(getuid()), gid \(getgid()); make the file readable by it, e.g. chmod 0644 or chown \(getuid()))"
            }
            return .failure(failure(message))
        }
        defer { _ = close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                return .failure(failure("cannot read \(path): \(describe(errno: errno))"))
            }
            if n == 0 { return .success(bytes) }
            bytes.append(contentsOf: chunk[0..<n])
            if bytes.count > limit { return .failure(failure("\(path) is larger than \(limit) bytes")) }
        }
    }

    /// The process's working directory, "/" if it cannot be determined.
    static func currentDirectory() -> String {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        guard getcwd(&buffer, buffer.count) != nil else { return "/" }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// `path` made absolute against `base` (itself made absolute against the working directory), with `.`, `..` and repeated slashes removed.
    static func resolve(_ path: String, against base: String) -> String {
        let joined: String
        if path.hasPrefix("/") {
            joined = path
        } else if base.hasPrefix("/") {
            joined = base + "/" + path
        } else {
            joined = currentDirectory() + "/" + base + "/" + path
        }
        var parts: [Substring] = []
        for part in joined.split(separator: "/", omittingEmptySubsequences: true) {
            switch part {
            case ".": continue
            case "..": _ = parts.popLast()
            default: parts.append(part)
            }
        }
        return "/" + parts.joined(separator: "/")
    }

    /// The directory part of an absolute path ("/a/b/c.json" → "/a/b").
    static func directory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        let dir = path[..<slash]
        return dir.isEmpty ? "/" : String(dir)
    }

    private static func failure(_ message: String) -> ConfigError {
        ConfigError(path: "", message: message)
    }
}
