import Glibc
import Testing

@testable import Credentials

/// A fresh directory under /tmp, removed (with its files) when the test ends.
private final class TemporaryDirectory {
    let path: String

    init() {
        var template = Array("/tmp/token-store-test-XXXXXX".utf8CString)
        path = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
    }

    deinit { remove(path) }

    /// The names in `directory` (default: this one), sorted, without `.` and `..`.
    func entries(_ directory: String? = nil) -> [String] {
        guard let dir = opendir(directory ?? path) else { return [] }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) {
                String(cString: $0.bindMemory(to: CChar.self).baseAddress!)
            }
            if name != ".", name != ".." { names.append(name) }
        }
        return names.sorted()
    }

    private func remove(_ target: String) {
        var info = stat()
        guard lstat(target, &info) == 0 else { return }
        if info.st_mode & S_IFMT == S_IFDIR {
            for name in entries(target) { remove(target + "/" + name) }
            rmdir(target)
        } else {
            unlink(target)
        }
    }
}

private func mode(of path: String) -> mode_t? {
    var info = stat()
    return stat(path, &info) == 0 ? info.st_mode & 0o777 : nil
}

private func writeFile(_ path: String, _ text: String) {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
    _ = text.utf8CString.withUnsafeBytes { write(fd, $0.baseAddress, $0.count - 1) }
    close(fd)
}

private func readFile(_ path: String) -> String? {
    guard let file = fopen(path, "r") else { return nil }
    defer { fclose(file) }
    var out: [UInt8] = []
    while case let c = fgetc(file), c != EOF { out.append(UInt8(c)) }
    return String(decoding: out, as: UTF8.self)
}

// Serialized: the umask test changes process-wide state.
@Suite("Token store", .serialized)
struct TokenStoreTests {
    static let tokens = TokenSet(
        accessToken: "at", idToken: "idt", refreshToken: "rt", expiresAt: 1_700_000_000, scope: "openid")

    @Test("saved tokens load back")
    func roundTrip() throws {
        let dir = TemporaryDirectory()
        let store = TokenStore(directory: dir.path)
        #expect(store.path == dir.path + "/tokens.json")
        try store.save(Self.tokens)
        #expect(store.load() == .loaded(Self.tokens))
        #expect(TokenStore(directory: dir.path + "/").load() == .loaded(Self.tokens))
    }

    @Test("no file means no login")
    func missing() {
        let dir = TemporaryDirectory()
        #expect(TokenStore(directory: dir.path).load() == .none)
        #expect(TokenStore(directory: dir.path + "/absent/deeper").load() == .none)
    }

    @Test("the file is 0600 and created directories 0700, even with umask 0")
    func modes() throws {
        let dir = TemporaryDirectory()
        let old = umask(0)
        defer { umask(old) }
        let stateDirectory = dir.path + "/state/platform-proxy"
        let store = TokenStore(directory: stateDirectory)
        try store.save(Self.tokens)
        #expect(mode(of: store.path) == 0o600)
        #expect(mode(of: stateDirectory) == 0o700)
        #expect(mode(of: dir.path + "/state") == 0o700)
    }

    @Test("save replaces the old file and leaves no temporary behind, even a stale one")
    func atomicReplace() throws {
        let dir = TemporaryDirectory()
        let store = TokenStore(directory: dir.path)
        try store.save(Self.tokens)
        writeFile(store.path + ".tmp", "left by a crash")
        var second = Self.tokens
        second.accessToken = "at-2"
        try store.save(second)
        #expect(store.load() == .loaded(second))
        #expect(dir.entries() == ["tokens.json"])
    }

    @Test("a corrupt file is moved aside, reported, and never overwritten by a later one")
    func corrupt() throws {
        let dir = TemporaryDirectory()
        let store = TokenStore(directory: dir.path)
        writeFile(store.path, "{\"access_token\":")
        guard case .corrupt(let first) = store.load() else { Issue.record("not reported corrupt"); return }
        #expect(first.hasPrefix(store.path + ".corrupt-"))
        #expect(readFile(first) == "{\"access_token\":")
        #expect(store.load() == .none)

        writeFile(store.path, "[]")
        guard case .corrupt(let second) = store.load() else { Issue.record("not reported corrupt"); return }
        #expect(second != first)
        #expect(readFile(first) == "{\"access_token\":")
        #expect(readFile(second) == "[]")
        #expect(dir.entries().count == 2)
    }

    @Test("delete removes the login; deleting nothing is fine")
    func delete() throws {
        let dir = TemporaryDirectory()
        let store = TokenStore(directory: dir.path)
        try store.save(Self.tokens)
        try store.delete()
        #expect(store.load() == .none)
        #expect(dir.entries().isEmpty)
        try store.delete()
        try TokenStore(directory: dir.path + "/never-created").delete()
    }

    @Test("a failure names the call and the reason")
    func errors() {
        let dir = TemporaryDirectory()
        writeFile(dir.path + "/file", "x")
        let store = TokenStore(directory: dir.path + "/file/state")
        #expect {
            try store.save(Self.tokens)
        } throws: { error in
            guard let error = error as? TokenStoreError else { return false }
            return error.call == "mkdir" && error.description.contains("Not a directory")
        }
    }
}

struct JourneySessionStoreTests {
    @Test("the AM session is stored 0600 beside the tokens, read back, and deleted at logout")
    func roundTrip() throws {
        let dir = TemporaryDirectory()
        let store = JourneySessionStore(directory: dir.path)
        #expect(store.load() == nil)
        try store.save("AQIC5w…*AAJTSQACMDE.*")
        #expect(store.load() == "AQIC5w…*AAJTSQACMDE.*")
        var info = stat()
        #expect(stat(dir.path + "/journey-session.json", &info) == 0)
        #expect(info.st_mode & 0o777 == 0o600)
        try store.delete()
        #expect(store.load() == nil)
        try store.delete()
    }
}
