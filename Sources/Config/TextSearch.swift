/// Substring search without `_StringProcessing`: the package's modules do not import it
/// (Package.swift), which keeps its code and that of its regex parser out of the binary and its
/// pages out of memory (docs/performance.md, "Memory at rest").
///
/// The search compares UTF-8 bytes, as the syntaxes searched here (URLs, host names, config
/// values) are defined; unlike the standard library's `Character` comparison it finds "e" in
/// "e\u{301}". The ranges it returns start and end on Unicode scalar boundaries.
extension StringProtocol {
    /// The first occurrence of `needle`, or nil; an empty needle is found at the start.
    public func firstRange(ofText needle: some StringProtocol) -> Range<Index>? {
        let haystack = utf8, pattern = needle.utf8
        guard let head = pattern.first else { return startIndex..<startIndex }
        var from = haystack.startIndex
        while let start = haystack[from...].firstIndex(of: head) {
            var h = start, p = pattern.startIndex
            while p != pattern.endIndex, h != haystack.endIndex, haystack[h] == pattern[p] {
                haystack.formIndex(after: &h)
                pattern.formIndex(after: &p)
            }
            if p == pattern.endIndex { return start..<h }
            if h == haystack.endIndex { return nil }
            from = haystack.index(after: start)
        }
        return nil
    }

    public func contains(text needle: some StringProtocol) -> Bool {
        firstRange(ofText: needle) != nil
    }
}
