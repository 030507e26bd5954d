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
    /// Its group's gid.
    public let group: gid_t
    /// Its permission bits (with setuid, setgid and sticky).
    public let mode: mode_t
    /// The proxy's effective uid.
    public let user: uid_t

    /// Describes `path`; see `StateTrust.judge` for when it is untrusted.
    public init(path: String, isDirectory: Bool, owner: uid_t, group: gid_t, mode: mode_t, user: uid_t) {
        self.path = path
        self.isDirectory = isDirectory
        self.owner = owner
        self.group = group
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
        let fix =
            isDirectory ? "chown \(user) \(path); chmod 0700 \(path)" : "chown \(user) \(path); chmod 0600 \(path)"
        return "\(kind) \(path) is owned by uid \(owner) (gid \(group)) with mode \(octalMode): it must belong to uid "
            + "\(user) (the proxy's user) or root and not be writable by others or by a group anyone else is in, "
            + "or another user could replace the tokens in it (\(fix))"
    }
}

/// Who may write the state directory and the files directly in it, the rule of ssh's
/// StrictModes: owned by the proxy's effective uid or root, no write bit for others, and no
/// group write bit unless the group is the proxy user's private one (Debian's ssh makes the same
/// exception: user-private groups, and the fsGroup Kubernetes gives a volume's files).
/// A sticky world-writable directory (/tmp) is refused too: others could create the files the
/// proxy has not written yet. The directory's parents are not checked.
public enum StateTrust {
    /// Nil when `owner`, `group` and `mode` are trusted for `user`, whose private group (if any)
    /// is `privateGroup`. A symbolic link's own mode means nothing (always 0777), so `isLink`
    /// judges the owner alone.
    public static func judge(
        path: String, isDirectory: Bool, isLink: Bool = false, owner: uid_t, group: gid_t,
        mode: mode_t, user: uid_t, privateGroup: gid_t? = nil
    ) -> UntrustedState? {
        let ownerTrusted = owner == user || owner == 0
        let groupWrites = mode & 0o020 != 0 && group != privateGroup
        let othersWrite = mode & 0o002 != 0
        guard !ownerTrusted || (!isLink && (groupWrites || othersWrite)) else { return nil }
        return UntrustedState(path: path, isDirectory: isDirectory, owner: owner, group: group, mode: mode, user: user)
    }

    /// The group whose only member is `user`: nobody else has it as primary group or is listed in
    /// it, and `user` is in it. Nil when there is none (or `user` has no passwd entry). Reads the
    /// whole user database (`getpwent`), so it is for startup only, before other threads exist.
    public static func privateGroup(of user: uid_t) -> gid_t? {
        guard let me = getpwuid(user) else { return nil }
        let gid = me.pointee.pw_gid
        let name = String(cString: me.pointee.pw_name)
        guard let group = getgrgid(gid) else { return nil }
        if var member = group.pointee.gr_mem {
            while let entry = member.pointee {
                if String(cString: entry) != name { return nil }
                member += 1
            }
        }
        setpwent()
        defer { endpwent() }
        while let other = getpwent() {
            if other.pointee.pw_gid == gid, other.pointee.pw_uid != user { return nil }
        }
        return gid
    }

    /// Creates `directory`, and any missing parents, mode 0700 when it is missing: made at start,
    /// before `check`, it cannot be made first by someone else between the check (which a missing
    /// directory passes) and the first write, which would then go into their directory. One
    /// that cannot be made (a read-only file system) is left to the writes to report.
    public static func create(directory: String) {
        try? DurableFile.makeDirectory(directory)
    }

    /// The first untrusted thing among `directory` (when it exists; a missing one is created
    /// mode 0700 when first written) and every entry directly in it (for a symbolic link, the
    /// link and what it points at). Blocks on the file system: call at startup.
    public static func check(directory: String, user: uid_t = geteuid()) -> UntrustedState? {
        let rule = Rule(user: user)
        if let problem = rule.judgeEntry(path: directory) { return problem }
        guard let dir = opendir(directory) else { return nil }
        defer { closedir(dir) }
        let base = directory.hasSuffix("/") ? directory : directory + "/"
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name == "." || name == ".." { continue }
            if let problem = rule.judgeEntry(path: base + name) { return problem }
        }
        return nil
    }

    /// The rule for one user, with its private group looked up once.
    private struct Rule {
        let user: uid_t
        let privateGroup: gid_t?

        init(user: uid_t) {
            self.user = user
            privateGroup = StateTrust.privateGroup(of: user)
        }

        /// `path` itself (`lstat`) and, for a link, its target (`stat`); nil when both are trusted
        /// or missing (the file or directory is then made by the proxy, with its own modes).
        func judgeEntry(path: String) -> UntrustedState? {
            var info = stat()
            guard lstat(path, &info) == 0 else { return nil }
            guard info.st_mode & S_IFMT == S_IFLNK else {
                return judge(path: path, isDirectory: info.st_mode & S_IFMT == S_IFDIR, info)
            }
            var target = stat()
            let found = stat(path, &target) == 0
            let isDirectory = found && target.st_mode & S_IFMT == S_IFDIR
            if let problem = judge(path: path, isDirectory: isDirectory, isLink: true, info) { return problem }
            return found ? judge(path: path, isDirectory: isDirectory, target) : nil
        }

        private func judge(path: String, isDirectory: Bool, isLink: Bool = false, _ info: stat) -> UntrustedState? {
            StateTrust.judge(
                path: path, isDirectory: isDirectory, isLink: isLink, owner: info.st_uid, group: info.st_gid,
                mode: info.st_mode, user: user, privateGroup: privateGroup)
        }
    }
}
