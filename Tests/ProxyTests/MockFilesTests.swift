import Foundation
import Testing

@testable import Proxy

/// A fresh temporary mock folder, removed when the test ends.
private final class MockFolder {
    let path: String

    init() throws {
        path =
            FileManager.default.temporaryDirectory
            .appendingPathComponent("mockfiles-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }

    func write(_ relative: String, _ text: String) throws {
        let url = URL(fileURLWithPath: path + "/" + relative)
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data(text.utf8).write(to: url)
    }

    func mkdir(_ relative: String) throws {
        try FileManager.default.createDirectory(atPath: path + "/" + relative, withIntermediateDirectories: true)
    }
}

private func body(_ lookup: MockFiles.Lookup) -> String? {
    guard case .found(let bytes, _) = lookup else { return nil }
    return String(decoding: bytes, as: UTF8.self)
}

@Suite("MockFiles")
struct MockFilesTests {
    @Test("<dir>/<rest>.json is served with its path")
    func servesFile() throws {
        let folder = try MockFolder()
        try folder.write("me.json", #"{"me":1}"#)
        let lookup = MockFiles().lookup(directory: folder.path, rest: "/me")
        #expect(lookup == .found(body: Array(#"{"me":1}"#.utf8), file: folder.path + "/me.json"))
    }

    @Test("an empty rest (or '/') serves index.json")
    func servesIndex() throws {
        let folder = try MockFolder()
        try folder.write("index.json", "[]")
        let mocks = MockFiles()
        #expect(
            mocks.lookup(directory: folder.path, rest: "")
                == .found(body: Array("[]".utf8), file: folder.path + "/index.json"))
        #expect(body(mocks.lookup(directory: folder.path, rest: "/")) == "[]")
    }

    @Test("a subfolder path /a/b reads <dir>/a/b.json")
    func subfolderFile() throws {
        let folder = try MockFolder()
        try folder.write("a/b.json", "\"ab\"")
        let lookup = MockFiles().lookup(directory: folder.path, rest: "/a/b")
        #expect(lookup == .found(body: Array("\"ab\"".utf8), file: folder.path + "/a/b.json"))
    }

    @Test("a folder's files are served in name order, looping")
    func folderLoops() throws {
        let folder = try MockFolder()
        // Written out of order: the order served is the names', not creation's.
        try folder.write("list/03.json", "3")
        try folder.write("list/01.json", "1")
        try folder.write("list/02.json", "2")
        let mocks = MockFiles()
        let served = (0..<7).map { _ in body(mocks.lookup(directory: folder.path, rest: "/list")) }
        #expect(served == ["1", "2", "3", "1", "2", "3", "1"])
        #expect(
            mocks.lookup(directory: folder.path, rest: "/list")
                == .found(body: Array("2".utf8), file: folder.path + "/list/02.json"))
    }

    @Test("the folder cursor is per folder")
    func cursorPerFolder() throws {
        let folder = try MockFolder()
        for name in ["a", "b"] {
            try folder.write("\(name)/1.json", "\(name)1")
            try folder.write("\(name)/2.json", "\(name)2")
        }
        let mocks = MockFiles()
        #expect(body(mocks.lookup(directory: folder.path, rest: "/a")) == "a1")
        #expect(body(mocks.lookup(directory: folder.path, rest: "/b")) == "b1")
        #expect(body(mocks.lookup(directory: folder.path, rest: "/a")) == "a2")
    }

    @Test("hidden files and subfolders in a mock folder are not served")
    func folderSkipsHiddenAndDirectories() throws {
        let folder = try MockFolder()
        try folder.write("list/.DS_Store", "junk")
        try folder.write("list/1.json", "1")
        try folder.mkdir("list/sub")
        let mocks = MockFiles()
        let served = (0..<3).map { _ in body(mocks.lookup(directory: folder.path, rest: "/list")) }
        #expect(served == ["1", "1", "1"])
    }

    @Test("<rest>.json wins over a folder of the same name")
    func fileBeforeFolder() throws {
        let folder = try MockFolder()
        try folder.write("x.json", "file")
        try folder.write("x/1.json", "folder")
        #expect(body(MockFiles().lookup(directory: folder.path, rest: "/x")) == "file")
    }

    @Test("a missing mock names the .json path it looked for")
    func missing() throws {
        let folder = try MockFolder()
        let mocks = MockFiles()
        #expect(mocks.lookup(directory: folder.path, rest: "/nope") == .missing(file: folder.path + "/nope.json"))
        #expect(mocks.lookup(directory: folder.path, rest: "") == .missing(file: folder.path + "/index.json"))
        #expect(mocks.lookup(directory: folder.path, rest: "/a/b") == .missing(file: folder.path + "/a/b.json"))
    }

    @Test("an empty folder is missing")
    func emptyFolderMissing() throws {
        let folder = try MockFolder()
        try folder.mkdir("empty")
        #expect(
            MockFiles().lookup(directory: folder.path, rest: "/empty") == .missing(file: folder.path + "/empty.json"))
    }

    @Test(
        "paths that try to leave the folder are refused",
        arguments: [
            "/../x", "/a/../../x", "/./x", "/%2e%2e/x", "/%2E%2E/x", "/.%2e/x", "/%2e/x",
            "/a%2fb", "/a%2Fb", "/a%5cb", "/a%5Cb", "/%00", "/a%00.json",
            "/%zz", "/%2", "/%", "/%c3%28",
        ])
    func traversalRefused(rest: String) throws {
        let folder = try MockFolder()
        // A file the traversal could reach if it were allowed.
        try folder.write("x.json", "outside")
        let inner = folder.path + "/inner"
        try folder.mkdir("inner")
        #expect(MockFiles().lookup(directory: inner, rest: Substring(rest)) == .invalidPath)
    }

    @Test("percent-encoded ordinary characters are decoded")
    func percentDecoding() throws {
        let folder = try MockFolder()
        try folder.write("a b.json", "space")
        #expect(body(MockFiles().lookup(directory: folder.path, rest: "/a%20b")) == "space")
    }

    @Test("safeRelativePath collapses empty segments")
    func emptySegments() {
        #expect(MockFiles.safeRelativePath("//a///b/") == "a/b")
        #expect(MockFiles.safeRelativePath("") == "")
    }
}
