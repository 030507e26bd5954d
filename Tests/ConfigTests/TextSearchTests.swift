import Testing

@testable import Config

@Suite("TextSearch")
struct TextSearchTests {
    @Test(
        "finds a needle at the start, in the middle and at the end, and slices back to it",
        arguments: [("://example", "://"), ("https://example", "://"), ("host..name", ".."), ("a..", "..")])
    func findsNeedle(haystack: String, needle: String) throws {
        let range = try #require(haystack.firstRange(ofText: needle))
        #expect(haystack[range] == needle)
        #expect(haystack.contains(text: needle))
    }

    @Test("a partial match does not hide a match that starts inside it")
    func restartsAfterPartialMatch() throws {
        let haystack = "aaab"
        let range = try #require(haystack.firstRange(ofText: "aab"))
        #expect(haystack.distance(from: haystack.startIndex, to: range.lowerBound) == 1)
        #expect(haystack[range] == "aab")
    }

    @Test(
        "no match, a needle longer than the text, and a match cut off by the end give nil",
        arguments: [("https:/x", "://"), ("ab", "abc"), ("host.", ".."), ("", "a")])
    func absent(haystack: String, needle: String) {
        #expect(haystack.firstRange(ofText: needle) == nil)
        #expect(!haystack.contains(text: needle))
    }

    @Test("an empty needle is found at the start")
    func emptyNeedle() {
        let text = "abc"
        #expect(text.firstRange(ofText: "") == text.startIndex..<text.startIndex)
    }

    @Test("searches a substring within its own bounds and compares UTF-8 bytes")
    func substringAndBytes() throws {
        let whole = "x://yz"
        let tail = whole.dropFirst(2)  // "//yz": the "://" starts before it
        #expect(tail.firstRange(ofText: "://") == nil)
        let range = try #require(whole.dropFirst().firstRange(ofText: "://"))
        #expect(range.lowerBound == whole.index(after: whole.startIndex))
        #expect("bücher".contains(text: "ü"))
        #expect("e\u{301}".contains(text: "e"))  // bytes, not Characters (see TextSearch.swift)
    }
}
