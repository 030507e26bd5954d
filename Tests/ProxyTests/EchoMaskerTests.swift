import Glibc
import Testing

@testable import Proxy

@Suite("EchoMasker")
struct EchoMaskerTests {
    private let token = Array("tok-0123456789abcdef".utf8)

    /// Feeds `text` in pieces of `size` bytes and returns what was emitted, and the mask count.
    private func stream(_ text: String, pieces size: Int) -> (String, Int) {
        var masker = EchoMasker(token: token)!
        var out: [UInt8] = []
        let bytes = Array(text.utf8)
        var i = 0
        while i < bytes.count {
            let piece = Array(bytes[i..<min(i + size, bytes.count)])
            piece.withUnsafeBytes { masker.process($0) { out.append(contentsOf: $0) } }
            i += size
        }
        masker.finish { out.append(contentsOf: $0) }
        return (String(decoding: out, as: UTF8.self), masker.masked)
    }

    @Test(
        "every occurrence is masked with as many bytes, whatever the chunk boundaries",
        arguments: [1, 2, 3, 5, 7, 19, 20, 21, 64, 4096])
    func acrossBoundaries(size: Int) {
        let body =
            #"{"headers":{"Authorization":"Bearer tok-0123456789abcdef"},"again":"tok-0123456789abcdeftok-0123456789abcdef","x":"tok-0123"}"#
        let expected = body.replacingOccurrences(of: "tok-0123456789abcdef", with: String(repeating: "*", count: 20))
        let (out, masked) = stream(body, pieces: size)
        #expect(out == expected)
        #expect(out.utf8.count == body.utf8.count)
        #expect(masked == 3)
    }

    @Test("a partial token at the end of the body is written as it is", arguments: [1, 4, 100])
    func partialAtEnd(size: Int) {
        let (out, masked) = stream("abc tok-01234567", pieces: size)
        #expect(out == "abc tok-01234567")
        #expect(masked == 0)
    }

    @Test("a near miss is released once it stops matching", arguments: [1, 3, 50])
    func nearMiss(size: Int) {
        let text = "tok-0123456789abcdeX and ttok-0123456789abcdef"
        let (out, masked) = stream(text, pieces: size)
        #expect(out == "tok-0123456789abcdeX and t" + String(repeating: "*", count: 20))
        #expect(masked == 1)
    }

    @Test("header values: masked copy only when the token is there")
    func headerValues() {
        var masker = EchoMasker(token: token)!
        #expect(masker.masking(Array("no token here".utf8)[...]) == nil)
        #expect(
            masker.masking(Array("Bearer tok-0123456789abcdef".utf8)[...])
                == Array(("Bearer " + String(repeating: "*", count: 20)).utf8))
        #expect(masker.masked == 1)
    }

    @Test(
        "a token holding `/` is masked where JSON escapes it as `\\/` too, whatever the chunk boundaries",
        arguments: [1, 2, 3, 9, 23, 24, 25, 4096])
    func jsonEscapedSlashes(size: Int) {
        let token = Array("ab/cd+ef/0123456789".utf8)
        let escaped = #"ab\/cd+ef\/0123456789"#
        let body = #"{"a":"Bearer "# + escaped + #"","b":"ab/cd+ef/0123456789","c":"ab\/cd+ef\/012345678"}"#
        var masker = EchoMasker(token: token)!
        var out: [UInt8] = []
        let bytes = Array(body.utf8)
        for start in stride(from: 0, to: bytes.count, by: size) {
            Array(bytes[start..<min(start + size, bytes.count)]).withUnsafeBytes {
                masker.process($0) { out.append(contentsOf: $0) }
            }
        }
        masker.finish { out.append(contentsOf: $0) }
        let expected =
            #"{"a":"Bearer "# + String(repeating: "*", count: 21) + #"","b":""#
            + String(repeating: "*", count: 19) + #"","c":"ab\/cd+ef\/012345678"}"#
        #expect(String(decoding: out, as: UTF8.self) == expected)
        #expect(masker.masked == 2)
        #expect(
            masker.masking(Array(("x " + escaped).utf8)[...]) == Array(("x " + String(repeating: "*", count: 21)).utf8))
    }

    @Test("tokens shorter than 8 bytes are not masked (they would match ordinary text)")
    func shortTokens() {
        #expect(EchoMasker(token: Array("abc".utf8)) == nil)
        #expect(EchoMasker(token: Array("12345678".utf8)) != nil)
    }

    @Test(
        "the search agrees with a naive one wherever the anchor byte sits in the token",
        arguments: ["Xabcdefghij", "abcdeXfghij", "abcdefghijX", "aaaaaaaaaaab", "abababababab"])
    func searchAgreesWithNaive(token: String) {
        let needle = Array(token.utf8)
        let masker = EchoMasker(token: needle)!
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array(Set(needle)) + Array("xyz".utf8)
        for round in 0..<200 {
            var haystack = (0..<(round % 60)).map { _ in alphabet.randomElement(using: &generator)! }
            if round % 3 == 0, haystack.count >= needle.count {
                let at = Int.random(in: 0...(haystack.count - needle.count), using: &generator)
                haystack.replaceSubrange(at..<(at + needle.count), with: needle)
            }
            let from = haystack.isEmpty ? 0 : Int.random(in: 0..<haystack.count, using: &generator)
            let naive =
                haystack.count < needle.count
                ? nil
                : (from...max(from, haystack.count - needle.count)).first {
                    $0 + needle.count <= haystack.count && Array(haystack[$0..<($0 + needle.count)]) == needle
                }
            let found = haystack.withUnsafeBytes { masker.find(in: $0, from: from)?.at }
            #expect(found == naive, "\(String(decoding: haystack, as: UTF8.self)) from \(from)")
        }
    }
}

@Suite("MockRecorder and tokens")
struct MockRecorderTokenTests {
    @Test("a recording never holds the token, however short, and is private (0600)")
    func recordingMasksAndIsPrivate() throws {
        var template = Array("/tmp/pp-record-XXXXXX".utf8CString)
        let dir = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)) }
        let recorder = MockRecorder(directory: dir, rest: "/item", overwrite: false, neverWritten: Array("abc".utf8))
        recorder.responseStarted(status: 200)
        Array(#"{"a":"xabcx","b":"abcabc"}"#.utf8).withUnsafeBytes { recorder.append($0) }
        let result = try #require(recorder.finish())
        #expect(result.error == nil)
        let file = dir + "/item.json"
        #expect(MockFiles.read(file) == .success(Array(#"{"a":"x***x","b":"******"}"#.utf8)))
        var info = stat()
        #expect(stat(file, &info) == 0 && info.st_mode & 0o777 == 0o600)
        unlink(file)
        rmdir(dir)
    }
}
