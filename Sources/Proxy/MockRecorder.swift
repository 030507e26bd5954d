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
    /// The injected token: masked in the file even when responses to the client are not.
    private let neverWritten: [UInt8]?

    init(directory: String, rest: Substring, overwrite: Bool, neverWritten: [UInt8]? = nil) {
        self.directory = directory
        self.rest = rest
        self.overwrite = overwrite
        self.neverWritten = neverWritten
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
        if let error = Self.makeDirectories(for: file) { return (file, error) }
        // Any length: a recording must never hold the token, even one short enough to mangle text.
        if let token = neverWritten, var masker = EchoMasker(token: token, minimumBytes: 1) {
            body.withUnsafeMutableBytes { masker.maskAll($0) }
        }
        return (file, Self.writeAtomically(body, to: file))
    }

    private static func makeDirectories(for file: String) -> String? {
        var path = ""
        for part in file.split(separator: "/").dropLast() {
            path += "/" + part
            if mkdir(path, 0o755) != 0 && errno != EEXIST { return "cannot create \(path): errno \(errno)" }
        }
        return nil
    }

    /// Temp file, then rename: a replaying reader never sees half a file.
    private static func writeAtomically(_ bytes: [UInt8], to file: String) -> String? {
        let temp = file + ".tmp-\(getpid())"
        let fd = open(temp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
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
        guard rename(temp, file) == 0 else {
            unlink(temp)
            return "cannot rename to \(file): errno \(errno)"
        }
        return nil
    }
}
