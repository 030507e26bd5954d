import Glibc

/// Record mode: keeps a 2xx response body as it streams to the client and writes it to the
/// replay layout (`<directory>/<rest>.json`, `index.json` for the route root) when it ends.
/// Existing files are kept unless `overwrite`; folders are created; failures are reported, never fatal.
/// Writes happen on the loop thread: record mode is a development tool for small JSON bodies.
/// Files are 0600 and never hold the injected token (responses may echo it).
final class MockRecorder {
    private let directory: String
    private let rest: Substring
    private let overwrite: Bool
    private var body: [UInt8] = []
    private var recording = false
    private var abandoned: String?
    /// The injected tokens (the first send's, and a refreshed one's after a 401): masked in the
    /// file even when responses to the client are not.
    private var neverWritten: [[UInt8]]

    init(directory: String, rest: Substring, overwrite: Bool, neverWritten: [UInt8]? = nil) {
        self.directory = directory
        self.rest = rest
        self.overwrite = overwrite
        self.neverWritten = neverWritten.map { [$0] } ?? []
    }

    /// A refreshed token was sent: the response may echo it too.
    func neverWrite(_ token: [UInt8]?) {
        if let token, !neverWritten.contains(token) { neverWritten.append(token) }
    }

    /// The response head arrived: only 2xx bodies are recorded.
    func responseStarted(status: Int) { recording = (200...299).contains(status) }

    func append(_ bytes: UnsafeRawBufferPointer) {
        guard recording, abandoned == nil else { return }
        guard body.count + bytes.count <= MockFiles.maxFileBytes else {
            abandoned = "the body is larger than \(MockFiles.maxFileBytes) bytes"
            body = []
            return
        }
        body.append(contentsOf: bytes)
    }

    /// The response ended: writes the file. Returns the file and an error, or nil when nothing was due.
    func finish() -> (file: String, error: String?)? {
        guard recording else { return nil }
        guard let relative = MockFiles.safeRelativePath(rest) else { return ("?", "the path is not a safe file name") }
        let file = (relative.isEmpty ? directory + "/index" : directory + "/" + relative) + ".json"
        if let abandoned { return (file, abandoned) }
        if !overwrite && access(file, F_OK) == 0 { return nil }
        if let error = Self.makeDirectories(for: relative, under: directory) { return (file, error) }
        // Any length: a recording must never hold the token, even one short enough to mangle text.
        for token in neverWritten {
            guard var masker = EchoMasker(token: token, minimumBytes: 1) else { continue }
            body.withUnsafeMutableBytes { masker.maskAll($0) }
        }
        return (file, Self.writeAtomically(body, to: file, overwrite: overwrite))
    }

    /// The mock folder itself is created as needed (it may be a symlink: the config names it);
    /// the folders below it that the request path names must be real folders, never symlinks,
    /// so a recording cannot be steered out of the mock folder by a link planted in it.
    private static func makeDirectories(for relative: String, under directory: String) -> String? {
        var path = ""
        for part in directory.split(separator: "/") {
            path += "/" + part
            if mkdir(path, 0o755) != 0 && errno != EEXIST { return "cannot create \(path): errno \(errno)" }
        }
        for part in relative.split(separator: "/").dropLast() {
            path += "/" + part
            if mkdir(path, 0o755) != 0 && errno != EEXIST { return "cannot create \(path): errno \(errno)" }
            var info = stat()
            guard lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFDIR else {
                return "\(path) is not a folder (a symlink is not followed when recording)"
            }
        }
        return nil
    }

    /// Temp file, then rename: a replaying reader never sees half a file. The temp file is new
    /// (`O_EXCL`, a random name, no symlink followed), so nothing planted under its name is
    /// written through; without `overwrite`, a file that appeared meanwhile is kept (`link`
    /// fails rather than replacing it).
    private static func writeAtomically(_ bytes: [UInt8], to file: String, overwrite: Bool) -> String? {
        let temp = file + ".tmp-" + String(UInt64.random(in: 0...UInt64.max), radix: 36)
        let fd = open(temp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return "cannot write \(temp): errno \(errno)" }
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else {
                close(fd)
                unlink(temp)
                return "cannot write \(temp): errno \(errno)"
            }
            offset += n
        }
        close(fd)
        if !overwrite {
            defer { unlink(temp) }
            guard link(temp, file) == 0 || errno == EEXIST else { return "cannot link \(file): errno \(errno)" }
            return nil
        }
        guard rename(temp, file) == 0 else {
            unlink(temp)
            return "cannot rename to \(file): errno \(errno)"
        }
        return nil
    }
}
