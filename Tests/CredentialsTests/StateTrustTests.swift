import Glibc
import Testing

@testable import Credentials

/// The state directory's trust rule (ssh's StrictModes): owned by the proxy's user or root, and
/// nobody else may write it or the files directly in it.
@Suite("State directory trust")
struct StateTrustTests {
    private let me: uid_t = 1000
    /// The user's private group in the table.
    private let mine: gid_t = 1000

    @Test(
        "owner, group and mode table",
        arguments: [
            // (owner, group, mode, isDirectory, trusted)
            (uid_t(1000), gid_t(1000), mode_t(0o700), true, true),
            (uid_t(1000), gid_t(100), mode_t(0o755), true, true),
            (uid_t(0), gid_t(0), mode_t(0o755), true, true),
            (uid_t(1000), gid_t(100), mode_t(0o600), false, true),
            (uid_t(1000), gid_t(100), mode_t(0o644), false, true),
            (uid_t(1000), gid_t(1000), mode_t(0o770), true, true),  // the private group
            (uid_t(1000), gid_t(1000), mode_t(0o2770), true, true),  // Kubernetes fsGroup on a volume
            (uid_t(1000), gid_t(1000), mode_t(0o660), false, true),
            (uid_t(65534), gid_t(65534), mode_t(0o700), true, false),
            (uid_t(65534), gid_t(1000), mode_t(0o700), true, false),
            (uid_t(65534), gid_t(65534), mode_t(0o777), true, false),
            (uid_t(1000), gid_t(100), mode_t(0o770), true, false),  // a shared group
            (uid_t(1000), gid_t(1000), mode_t(0o772), true, false),
            (uid_t(1000), gid_t(1000), mode_t(0o702), true, false),
            (uid_t(0), gid_t(0), mode_t(0o1777), true, false),
            (uid_t(0), gid_t(1000), mode_t(0o2777), true, false),  // a Kubernetes emptyDir
            (uid_t(0), gid_t(0), mode_t(0o775), true, false),
            (uid_t(1000), gid_t(100), mode_t(0o666), false, false),
            (uid_t(1000), gid_t(100), mode_t(0o620), false, false),
            (uid_t(65534), gid_t(65534), mode_t(0o600), false, false),
        ])
    func table(owner: uid_t, group: gid_t, mode: mode_t, isDirectory: Bool, trusted: Bool) {
        let verdict = StateTrust.judge(
            path: "/s", isDirectory: isDirectory, owner: owner, group: group, mode: mode,
            user: me, privateGroup: mine)
        #expect((verdict == nil) == trusted, "owner \(owner) group \(group) mode \(String(mode, radix: 8))")
    }

    @Test("without a private group, any group write is refused")
    func noPrivateGroup() {
        #expect(StateTrust.judge(path: "/s", isDirectory: true, owner: me, group: mine, mode: 0o770, user: me) != nil)
    }

    @Test("a link is judged by its owner: its own mode is always 0777")
    func link() {
        #expect(
            StateTrust.judge(
                path: "/s/l", isDirectory: false, isLink: true, owner: me, group: 100, mode: 0o777, user: me) == nil)
        #expect(
            StateTrust.judge(
                path: "/s/l", isDirectory: false, isLink: true, owner: 65534, group: 100, mode: 0o777, user: me) != nil)
    }

    @Test("the refusal names the path, the owner and the mode")
    func message() {
        let problem = StateTrust.judge(
            path: "/srv/state", isDirectory: true, owner: 65534, group: 65534,
            mode: S_IFDIR | 0o777, user: 0)
        #expect(problem?.octalMode == "0777")
        #expect(
            problem?.description.hasPrefix(
                "state directory /srv/state is owned by uid 65534 (gid 65534) with mode 0777: it must belong to uid 0")
                == true)
        let sticky = StateTrust.judge(path: "/tmp", isDirectory: true, owner: 0, group: 0, mode: 0o1777, user: 1000)
        #expect(sticky?.octalMode == "1777")
        let file = StateTrust.judge(
            path: "/s/tokens.json", isDirectory: false, owner: 1000, group: 100, mode: 0o666, user: 1000)
        #expect(
            file?.description.hasPrefix("state file /s/tokens.json is owned by uid 1000 (gid 100) with mode 0666")
                == true)
    }

    @Test("a missing directory passes; a private one with private files passes; a loose file or link is named")
    func directory() {
        var template = Array("/tmp/state-trust-test-XXXXXX".utf8CString)
        let dir = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
        let file = dir + "/tokens-x.json"
        defer {
            unlink(file)
            rmdir(dir)
        }
        let user = geteuid()
        #expect(StateTrust.check(directory: dir + "/missing", user: user) == nil)
        #expect(StateTrust.check(directory: dir, user: user) == nil)  // mkdtemp makes it 0700
        close(open(file, O_CREAT | O_WRONLY | O_CLOEXEC, 0o600))
        #expect(StateTrust.check(directory: dir, user: user) == nil)
        chmod(file, 0o646)
        #expect(StateTrust.check(directory: dir, user: user)?.path == file)
        chmod(file, 0o600)
        chmod(dir, 0o707)
        #expect(StateTrust.check(directory: dir, user: user)?.path == dir)
        chmod(dir, 0o700)
        // A link is judged by what it points at as well.
        let outside = dir + ".outside"
        let link = dir + "/tokens-y.json"
        close(open(outside, O_CREAT | O_WRONLY | O_CLOEXEC, 0o600))
        chmod(outside, 0o666)
        symlink(outside, link)
        #expect(StateTrust.check(directory: dir, user: user)?.path == link)
        #expect(StateTrust.check(directory: dir, user: user)?.octalMode == "0666")
        chmod(outside, 0o600)
        #expect(StateTrust.check(directory: dir, user: user) == nil)
        unlink(link)
        unlink(outside)
        // Judged for another user, our directory is someone else's (unless we are root).
        let forOther = StateTrust.check(directory: dir, user: user &+ 12345)
        if user == 0 { #expect(forOther == nil) } else { #expect(forOther?.path == dir && forOther?.owner == user) }
    }

    @Test("an unknown user has no private group")
    func privateGroupLookup() {
        #expect(StateTrust.privateGroup(of: 4_000_000_000) == nil)
    }
}
