/// The login that survives a restart: `<stateDirectory>/tokens.json`, mode 0600, replaced
/// atomically. Every call blocks on disk I/O (fsync), so callers run them on a
/// `BlockingWorker`, never on an event loop.
public final class TokenStore: Sendable {
    /// What `load` found.
    public enum LoadResult: Equatable, Sendable {
        /// No token file: nobody has logged in.
        case none
        /// The stored tokens.
        case loaded(TokenSet)
        /// The file was unreadable and now sits at `movedTo` for inspection; it is never deleted.
        /// `movedTo` is the file's own path if even the rename failed.
        case corrupt(movedTo: String)
    }

    private let file: DurableFile
    /// The state directory.
    public var directory: String { file.directory }
    /// `<directory>/tokens.json` (or the provider's own file name).
    public var path: String { file.path }

    /// The file name of the journey session store that goes with these tokens.
    public let journeySessionName: String

    /// A store in `directory`, which `save` creates (mode 0700) when missing; one per provider
    /// (`name` and `journeySession` are that provider's file names).
    public init(directory: String, name: String = "tokens.json", journeySession: String = "journey-session.json") {
        file = DurableFile(directory: directory, name: name)
        journeySessionName = journeySession
    }

    /// The stored tokens; a file that exists but cannot be read as tokens is moved aside.
    public func load() -> LoadResult {
        switch file.read() {
        case .missing: return .none
        case .bytes(let bytes): if let tokens = TokenSet.parse(bytes) { return .loaded(tokens) }
        case .unreadable: break
        }
        return .corrupt(movedTo: file.moveAside())
    }

    /// Writes `tokens` durably: a fresh 0600 temporary file, fsync, rename over
    /// `tokens.json`, fsync of the directory. A crash leaves the old file or the new one.
    public func save(_ tokens: TokenSet) throws(TokenStoreError) { try file.write(tokens.json()) }

    /// Removes the stored tokens (logout); a missing file is fine.
    public func delete() throws(TokenStoreError) { try file.delete() }
}
