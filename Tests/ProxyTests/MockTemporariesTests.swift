import Foundation
import Testing

@testable import Proxy

@Suite("MockTemporaries")
struct MockTemporariesTests {
    @Test(
        "record mode's temporary names are recognised, fixtures are not",
        arguments: [
            ("a.json.tmp-3k9x0q", true), ("index.json.tmp-0", true), ("x.tmp-zz", true),
            ("a.json", false), ("a.json.tmp-", false), (".tmp-abc", false), ("a.json.tmp-ABC", false),
            ("a.tmp-b.json", false), ("tmp-abc", false), ("a.json.tmp-ab-c", false),
        ])
    func names(name: String, temporary: Bool) {
        #expect(MockTemporaries.isTemporary(name) == temporary)
    }

    @Test("removeStale deletes temporaries in every subfolder and nothing else")
    func removesOnlyTemporaries() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("mocktemps-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: root) }
        try FileManager.default.createDirectory(atPath: root + "/users/list", withIntermediateDirectories: true)
        for file in [
            "a.json", "a.json.tmp-1x", "users/list/1.json", "users/list/1.json.tmp-9z", "users/b.tmp-b.json",
            "users/notes.tmp-old",
        ] {
            try Data("{}".utf8).write(to: URL(fileURLWithPath: root + "/" + file))
            // The recorder's temporaries are 0600; the user's own files (a checkout's 0644) are not its.
            let mode: mode_t = file.hasSuffix("tmp-1x") || file.hasSuffix("tmp-9z") ? 0o600 : 0o644
            #expect(chmod(root + "/" + file, mode) == 0)
        }
        let removed = MockTemporaries.removeStale(under: root).sorted()
        #expect(removed == [root + "/a.json.tmp-1x", root + "/users/list/1.json.tmp-9z"])
        #expect(FileManager.default.fileExists(atPath: root + "/users/notes.tmp-old"))
        #expect(FileManager.default.fileExists(atPath: root + "/a.json"))
        #expect(FileManager.default.fileExists(atPath: root + "/users/list/1.json"))
        #expect(FileManager.default.fileExists(atPath: root + "/users/b.tmp-b.json"))
    }

    @Test("folder replay skips a temporary left beside the files")
    func replaySkipsTemporaries() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("mocktemps-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: root) }
        try FileManager.default.createDirectory(atPath: root + "/feed", withIntermediateDirectories: true)
        try Data("{\"n\":1}".utf8).write(to: URL(fileURLWithPath: root + "/feed/1.json"))
        try Data("{\"n\":".utf8).write(to: URL(fileURLWithPath: root + "/feed/1.json.tmp-abc"))
        #expect(MockFiles.list(root + "/feed") == ["1.json"])
    }
}
