import Config
import Glibc

/// The `static` grant: tokens from literal, `{"env"}` or `{"file"}` sources. Files are
/// re-read when their modification time, size or inode changes (a rotated token file is
/// picked up without a restart). Blocking file reads happen on the caller's thread, which
/// is the lifecycle thread, never a loop.
public final class StaticCredentialSource {
    private let accessToken: SecretSource?
    private let idToken: SecretSource?
    private let tokenType: String
    private var fingerprint: [FileStamp?] = []
    private var lastValues: (String?, String?)?
    private var generation: UInt64 = 0
    /// The last problem reading the sources, if any (a path and a reason, never a secret).
    public private(set) var lastError: String?

    /// Creates the source from the provider config.
    public init(accessToken: SecretSource?, idToken: SecretSource?, tokenType: String) {
        self.accessToken = accessToken
        self.idToken = idToken
        self.tokenType = tokenType
    }

    /// A new snapshot when the tokens changed since the last call (or on the first call), else nil.
    public func poll() -> CredentialSnapshot? {
        let stamps = [accessToken, idToken].map { source -> FileStamp? in
            if case .file(let path)? = source { return FileStamp(path: path) }
            return nil
        }
        if lastValues != nil && stamps == fingerprint { return nil }
        fingerprint = stamps
        // Each token stands alone: a missing id_token file must not stop access-token routes.
        var problems: [String] = []
        func read(_ source: SecretSource?) -> String? {
            do { return try source?.resolveToken() } catch {
                problems.append(error.description)
                return nil
            }
        }
        let access = read(accessToken)
        let id = read(idToken)
        lastError = problems.isEmpty ? nil : problems.joined(separator: "; ")
        if let lastValues, lastValues == (access, id) { return nil }
        lastValues = (access, id)
        generation += 1
        let claims = id.flatMap(JWTClaims.decode)
        let status = AuthStatus(
            state: access == nil ? .loggedOut : .loggedIn, expiresAt: claims?.expiresAt,
            subject: claims?.analyticsSubject, lastError: lastError)
        return CredentialSnapshot(
            generation: generation, accessToken: access, idToken: id, tokenType: tokenType, status: status)
    }
}

/// What identifies a file's version cheaply: inode, size and modification time.
struct FileStamp: Equatable {
    var inode: UInt64
    var size: Int64
    var modified: Int64

    init?(path: String) {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        inode = UInt64(info.st_ino)
        size = Int64(info.st_size)
        modified = Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec)
    }
}
