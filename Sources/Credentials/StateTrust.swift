import Glibc

/// A state directory, or a file in it, that someone other than the proxy's user may write: they
/// could plant `tokens-<name>.json` and have the proxy send their token upstream. Names the path,
/// its owner and mode, as ssh does for a key it will not use.
public struct UntrustedState: Error, Sendable, Equatable, CustomStringConvertible {
    /// The directory or file.
    public let path: String
    /// Whether `path` is the state directory itself (or a directory in it).
    public let isDirectory: Bool
    /// Its owner's uid.
    public let owner: uid_t
    /// Its permission bits (with setuid, setgid and sticky).
    public let mode: mode_t
    /// The proxy's effective uid.
    public let user: uid_t

    /// Describes `path`; see `StateTrust.judge` for when it is untrusted.
    public init(path: String, isDirectory: Bool, owner: uid_t, mode: mode_t, user: uid_t) {
        self.path = path
        self.isDirectory = isDirectory
        self.owner = owner
        self.mode = mode & 0o7777
        self.user = user
    }

    /// The mode as four octal digits, e.g. `0777`.
    public var octalMode: String {
        let digits = String(mode, radix: 8)
        return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
    }

    public var description: String {
        let kind = isDirectory ? "state directory" : "state file"
        let fix = isDirectory ? "chown \(user) \(path); chmod 0700 \(path)" : "chown \(user) \(path); chmod 0600 \(path)"
        return "\(kind) \(path) is owned by uid \(owner) with mode \(octalMode): it must belong to uid \(user) "
            + "(the proxy's user) or root and not be writable by group or others, or another user could replace "
            + "the tokens in it (\(fix))"
    }
}

/// Who may write the state directory and the files directly in it, the rule of ssh's
/// StrictModes: owned by the proxy's effective uid or root, no write bit for group or others.
/// A sticky world-writable directory (/tmp) is refused too: others could create the files the
/// proxy has not written yet. The directory's parents are not checked.
public enum StateTrust {
    /// Nil when `owner` and `mode` are trusted for `user`. A symbolic link's own mode means
    /// nothing (always 0777), so `isLink` judges the owner alone.
    public static func judge(path: String, isDirectory: Bool, isLink: Bool = false, owner: uid_t, mode: mode_t,
                             user: uid_t) -> UntrustedState? {
        let ownerTrusted = owner == user || owner == 0
        let writableByOthers = !isLink && mode & 0o022 != 0
        guard !ownerTrusted || writableByOthers else { return nil }
        return UntrustedState(path: path, isDirectory: isDirectory, owner: owner, mode: mode, user: user)
    }

    /// The first untrusted thing among `directory` (when it exists; a missing one is created
    /// mode 0700 when first written) and every entry directly in it (for a symbolic link, the
    /// link and what it points at). Blocks on the file system: call at startup.
    public static func check(directory: String, user: uid_t = geteuid()) -> UntrustedState? {
        if let problem = judgeEntry(path: directory, user: user) { return problem }
        guard let dir = opendir(directory) else { return nil }
        defer { closedir(dir) }
        let base = directory.hasSuffix("/") ? directory : directory + "/"
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name == "." || name == ".." { continue }
            if let problem = judgeEntry(path: base + name, user: user) { return problem }
        }
        return nil
    }

    /// `path` itself (`lstat`) and, for a link, its target (`stat`); nil when both are trusted
    /// or missing (the file or directory is then made by the proxy, with its own modes).
    private static func judgeEntry(path: String, user: uid_t) -> UntrustedState? {
        var info = stat()
        guard lstat(path, &info) == 0 else { return nil }
        guard info.st_mode & S_IFMT == S_IFLNK else {
            return judge(path: path, isDirectory: info.st_mode & S_IFMT == S_IFDIR, owner: info.st_uid, mode: info.st_mode, user: user)
        }
        var target = stat()
        let found = stat(path, &target) == 0
        let isDirectory = found && target.st_mode & S_IFMT == S_IFDIR
        if let problem = judge(path: path, isDirectory: isDirectory, isLink: true, owner: info.st_uid, mode: info.st_mode, user: user) {
            return problem
        }
        guard found else { return nil }
        return judge(path: path, isDirectory: isDirectory, owner: target.st_uid, mode: target.st_mode, user: user)
    }
}
